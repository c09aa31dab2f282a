import { expect, it } from 'vitest';
import { EVENTS, finish, midRun, RATE, useProductionScenario } from './scenario.ts';
import { Publisher, waitUntilSettled } from './workload.ts';
import { sleep } from '../support/wait.ts';

const scenario = useProductionScenario('prod-temporal-kill');

/** Long enough for publish calls to give up (the Temporal client retries an unavailable server for about 20 s). */
const DOWN_MS = 25_000;

it('production topology: delivers every event when the Temporal server is killed with SIGKILL and started again on its database', async () => {
  const { cluster, webhook } = scenario;
  // Gives up on a 5xx: what the API committed before failing to start the workflows must
  // reach the receiver through the repair check alone.
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE, retryServerErrors: false });
  await midRun(scenario, publisher);
  const damagedAt = Date.now();
  cluster.damaged('temporal');
  await cluster.topology.kill('temporal');
  await sleep(DOWN_MS);
  const stoppedWhileDown = (await cluster.topology.refresh()).stopped;
  await cluster.repair();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  const figures = await finish('production: Temporal server SIGKILL', scenario, [publisher], {
    startedAt: publisher.startedAt,
    damagedAt,
    repairedAt,
    settledAt: settled.at,
  });
  // Only the server died: the replicas rode out its absence.
  expect(stoppedWhileDown).toEqual([{ role: 'temporal', index: 0 }]);
  expect(figures.deliveries).toBe(figures.accepted + figures.rejectedButStored);
});
