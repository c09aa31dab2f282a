import { it } from 'vitest';
import { outageRecovery, OUTAGE_ENV } from './outage-recovery.ts';
import { useProductionScenario } from './scenario.ts';

const scenario = useProductionScenario('prod-outage-recovery', OUTAGE_ENV);

it('production topology: recovers a customer outage with bulk retries while one of the two worker replicas is killed with SIGKILL (the other carries on)', async () => {
  await outageRecovery('production: outage recovery (bulk retry, one worker replica SIGKILL)', scenario, async () => {
    scenario.cluster.damaged('worker', 1);
    await scenario.cluster.topology.kill('worker', 1);
  });
}, 1_200_000);
