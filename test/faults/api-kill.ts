/**
 * The API-kill scenario, on either topology: an API process is killed with SIGKILL while publish
 * calls are in flight, then repaired. Every event that got a 202 must be delivered, and every
 * event whose call got no answer, published again with the same id, delivered exactly once.
 */
import { expect } from 'vitest';
import { EVENTS, finish, RATE, type ScenarioContext } from './scenario.ts';
import { sleep, waitFor } from '../support/wait.ts';
import { Publisher, waitUntilSettled, type Deployment } from './workload.ts';

export async function killApiWhilePublishing(
  scenario: ScenarioContext<Deployment>,
  name: string,
  damage: { kill(): Promise<void>; repair(): Promise<void> },
): Promise<void> {
  const { cluster, receiver, webhook } = scenario;
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await publisher.whenAccepted(Math.round(EVENTS * 0.4));
  // Kill it while calls are in flight, so some get no answer at all: at the paced rate a call
  // is rarely in flight, so every lane publishes at once until several are.
  publisher.surge();
  await waitFor('publish calls in flight', () => publisher.inFlight >= 8, { timeoutMs: 30_000, intervalMs: 1 });
  const damagedAt = Date.now();
  await damage.kill();
  await sleep(2_000);
  await damage.repair();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  // Events whose call got no answer and that the producer published again with the same id.
  const republished = publisher.records.filter((record) => record.outcomes.includes('unanswered'));
  const timesSeen = republished.map((record) => receiver.seen.get(record.accepted?.deliveryIds[0] ?? '')?.count ?? 0);
  const figures = await finish(
    name,
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
}
