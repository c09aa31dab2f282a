import { it } from 'vitest';
import { outageRecovery, OUTAGE_ENV } from './outage-recovery.ts';
import { useScenario } from './scenario.ts';
import { sleep } from '../support/wait.ts';

const scenario = useScenario('outage-recovery', OUTAGE_ENV);

it('recovers every delivery dead-lettered by a customer outage with one bulk call per webhook, at the configured rate, through a worker SIGKILL and restart', async () => {
  await outageRecovery('outage recovery (bulk retry, worker SIGKILL)', scenario, async () => {
    await scenario.cluster.worker.kill();
    await sleep(3_000);
    await scenario.cluster.worker.start();
  });
}, 1_200_000);
