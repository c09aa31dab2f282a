import { expect, it } from 'vitest';
import { sleep, waitFor } from './wait.ts';
import { EVENTS, finish, RATE, useScenario } from './scenario.ts';
import { Publisher, waitUntilSettled } from './workload.ts';

const scenario = useScenario('api-kill');

it('delivers every 202 and, once, every unanswered event published again, when the API is killed mid-publish', async () => {
  const { cluster, receiver, webhook } = scenario;
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await publisher.whenAccepted(Math.round(EVENTS * 0.4));
  // Kill it while calls are in flight, so some get no answer at all: at the paced rate a call
  // is rarely in flight, so every lane publishes at once until several are.
  publisher.surge();
  await waitFor('publish calls in flight', () => publisher.inFlight >= 8, { timeoutMs: 30_000, intervalMs: 1 });
  const damagedAt = Date.now();
  await cluster.api.kill();
  await sleep(2_000);
  await cluster.api.start();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  // Events whose call got no answer and that the producer published again with the same id.
  const republished = publisher.records.filter((record) => record.outcomes.includes('unanswered'));
  const timesSeen = republished.map((record) => receiver.seen.get(record.accepted?.deliveryIds[0] ?? '')?.count ?? 0);
  const figures = await finish(
    'API SIGKILL while publishing',
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
  // Each of them: one event (the account checks the 202 against the database) and one send.
  expect(timesSeen).toEqual(republished.map(() => 1));
});
