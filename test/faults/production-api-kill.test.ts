import { expect, it } from 'vitest';
import { EVENTS, finish, RATE, useProductionScenario } from './scenario.ts';
import { Publisher, waitUntilSettled } from './workload.ts';
import { sleep, waitFor } from './wait.ts';

const scenario = useProductionScenario('prod-api-kill');

it('production topology: delivers every 202 and, once, every unanswered event published again, when one of two API replicas is killed mid-publish', async () => {
  const { cluster, receiver, webhook } = scenario;
  // The producer spreads its calls over both replicas and sends a retry to the other one.
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await publisher.whenAccepted(Math.round(EVENTS * 0.4));
  publisher.surge();
  await waitFor('publish calls in flight', () => publisher.inFlight >= 8, { timeoutMs: 30_000, intervalMs: 1 });
  const damagedAt = Date.now();
  cluster.damaged('api', 0);
  await cluster.topology.kill('api', 0);
  await sleep(2_000);
  await cluster.repair();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  const republished = publisher.records.filter((record) => record.outcomes.includes('unanswered'));
  const timesSeen = republished.map((record) => receiver.seen.get(record.accepted?.deliveryIds[0] ?? '')?.count ?? 0);
  const figures = await finish(
    'production: one of two API replicas SIGKILL while publishing',
    scenario,
    [publisher],
    { startedAt: publisher.startedAt, damagedAt, repairedAt, settledAt: settled.at },
    {
      unansweredThenRepublished: republished.length,
      refusedWhileDown: publisher.records.filter((record) => record.outcomes.includes('refused')).length,
    },
  );
  expect(figures.deliveries).toBe(EVENTS);
  expect(republished.length).toBeGreaterThan(0);
  expect(timesSeen).toEqual(republished.map(() => 1));
});
