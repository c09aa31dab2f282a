import { expect, it } from 'vitest';
import { sleep } from '../support/wait.ts';
import { EVENTS, finish, midRun, RATE, useScenario } from './scenario.ts';
import { Publisher, waitUntilSettled } from './workload.ts';

const scenario = useScenario('temporal-kill');

/**
 * Long enough for publish calls to give up (the Temporal client retries an unavailable
 * server for about 20 s) and answer 500 after their database commit.
 */
const DOWN_MS = 25_000;

it('delivers every event when the Temporal server is killed with SIGKILL and restarted on its database file', async () => {
  const { cluster, webhook } = scenario;
  // This producer gives up on a 5xx: what the API committed before failing to start the
  // workflows must then reach the receiver through the repair check alone.
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE, retryServerErrors: false });
  await midRun(scenario, publisher);
  const damagedAt = Date.now();
  await cluster.temporal.kill();
  await sleep(DOWN_MS);
  await cluster.temporal.start();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  const figures = await finish('Temporal SIGKILL', scenario, [publisher], {
    startedAt: publisher.startedAt,
    damagedAt,
    repairedAt,
    settledAt: settled.at,
  });
  expect(figures.deliveries).toBe(figures.accepted + figures.rejectedButStored);
});
