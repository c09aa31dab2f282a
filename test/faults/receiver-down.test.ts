import { eq, inArray } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { deliveries, deliveryAttempts } from '../../src/db/schema.ts';
import { sleep, waitFor } from '../support/wait.ts';
import { EVENTS, finish, RATE, useScenario } from './scenario.ts';
import { call } from '../support/http.ts';
import { Publisher, statusCounts, waitUntilSettled, type ScenarioWebhook } from './workload.ts';
import type { Cluster } from './cluster.ts';

/**
 * The outage is measured against the retry schedule itself: the open breaker's probes are not
 * spaced, and what the outage held back is not paced when the receiver is back (both are measured
 * by the endpoint-recovery benchmark, docs/performance.md).
 */
const scenario = useScenario('receiver-down', { CIRCUIT_BREAKER_PROBE_INTERVAL: '0s', PROJECT_RECOVERY_RATE: '0' });

/**
 * Longer than one round of the retry policy (attempts at 0, 1, 3, 7 and 15 s): deliveries
 * whose round starts in the first 5 s of the outage cannot make it and end in dead_letter.
 */
const DOWN_MS = 20_000;

/** Asks for a manual retry of each delivery through the v2 API; returns the statuses answered. */
async function retryAll(cluster: Cluster, webhook: ScenarioWebhook, ids: string[]): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < ids.length; i += 8) {
    const answers = await Promise.all(
      ids.slice(i, i + 8).map((id) =>
        call(`${cluster.apiUrl}/api-gateway/v2/webhooks/${webhook.webhookId}/deliveries/${id}/retry`, {
          method: 'POST',
          token: webhook.token,
        }),
      ),
    );
    statuses.push(...answers.map((answer) => (typeof answer === 'string' ? 0 : answer.status)));
  }
  return statuses;
}

async function deadLettered(cluster: Cluster, webhookId: string) {
  const rows = await cluster.db.select().from(deliveries).where(eq(deliveries.webhookId, webhookId));
  return rows.filter((row) => row.status === 'dead_letter');
}

it('retries through a receiver outage, dead-letters what outlasts the schedule, and delivers it on a manual retry', async () => {
  const { cluster, receiver, webhook } = scenario;

  // Phase A: the receiver goes down for 20 s mid-run (connection refused), then comes back
  // on the same port with the same certificate.
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE, prefix: 'evt-a' });
  await publisher.whenAccepted(Math.round(EVENTS * 0.4));
  await waitFor('deliveries under way', () => receiver.seen.size >= 100, { timeoutMs: 60_000 });
  const downAt = Date.now();
  await receiver.stop();
  let failedSeen = 0;
  while (Date.now() - downAt < DOWN_MS) {
    failedSeen = Math.max(failedSeen, (await statusCounts(cluster, webhook.webhookId)).failed ?? 0);
    await sleep(500);
  }
  await receiver.start();
  const upAt = Date.now();
  const autoSettled = await waitUntilSettled(cluster, webhook.webhookId, publisher, {
    timeoutMs: 240_000,
    settled: ['delivered', 'dead_letter'],
  });

  // A delivery may end in dead_letter only if its whole round (5 attempts, 15 s) fell inside
  // the outage; every other one went failed and then delivered within the retry schedule.
  const deadA = await deadLettered(cluster, webhook.webhookId);
  const attemptsA =
    deadA.length === 0
      ? []
      : await cluster.db.select().from(deliveryAttempts).where(inArray(deliveryAttempts.deliveryId, deadA.map((row) => row.id)));
  const outsideOutage = attemptsA.filter(
    (attempt) => attempt.startedAt.getTime() < downAt - 2_000 || attempt.startedAt.getTime() > upAt + 1_000 || attempt.outcome === 'succeeded',
  );
  const allRows = await cluster.db.select().from(deliveries).where(eq(deliveries.webhookId, webhook.webhookId));
  const allAttempts = await cluster.db
    .select()
    .from(deliveryAttempts)
    .where(inArray(deliveryAttempts.deliveryId, allRows.map((row) => row.id)));
  const failedIds = new Set(allAttempts.filter((a) => a.outcome !== 'succeeded').map((a) => a.deliveryId));
  const failedThenDelivered = allRows.filter((row) => row.status === 'delivered' && failedIds.has(row.id)).length;

  const retryA = await retryAll(cluster, webhook, deadA.map((row) => row.id));
  const settledA = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 120_000 });

  // Phase B: the receiver is down for longer than the schedule; every event published then
  // ends in dead_letter, and a manual retry delivers it once the receiver is back.
  await receiver.stop();
  const downBAt = Date.now();
  const batchB = new Publisher({ cluster, webhook, count: 20, prefix: 'evt-b' });
  await batchB.done;
  await waitFor(
    'every phase B delivery to be dead-lettered',
    async () => (await deadLettered(cluster, webhook.webhookId)).length === batchB.accepted,
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  const deadB = await deadLettered(cluster, webhook.webhookId);
  await receiver.start();
  const upBAt = Date.now();
  const retryB = await retryAll(cluster, webhook, deadB.map((row) => row.id));
  const settledB = await waitUntilSettled(cluster, webhook.webhookId, batchB, { timeoutMs: 120_000 });

  const figures = await finish(
    'receiver down',
    scenario,
    [publisher, batchB],
    { startedAt: publisher.startedAt, damagedAt: downAt, repairedAt: upAt, settledAt: autoSettled.at },
    {
      failedSeenDuringOutage: failedSeen,
      failedThenDeliveredAutomatically: failedThenDelivered,
      deadLetteredInOutage: deadA.length,
      manualRetryToDeliveredMs: settledA.at - autoSettled.at,
      longOutage: {
        events: batchB.records.length,
        deadLettered: deadB.length,
        outageMs: upBAt - downBAt,
        manualRetryToDeliveredMs: settledB.at - upBAt,
      },
    },
  );
  expect(figures.deliveries).toBe(EVENTS + 20);
  expect(failedSeen).toBeGreaterThan(0);
  expect(failedThenDelivered).toBeGreaterThan(0);
  expect(outsideOutage.map((a) => `${a.deliveryId} #${a.attemptNumber} ${a.startedAt.toISOString()} ${a.outcome}`)).toEqual([]);
  for (const row of deadA) expect(row.attemptCount).toBe(5);
  expect(retryA.filter((status) => status !== 202)).toEqual([]);
  expect(deadB.length).toBe(20);
  for (const row of deadB) expect(row).toMatchObject({ attemptCount: 5, lastError: 'connection refused' });
  expect(retryB.filter((status) => status !== 202)).toEqual([]);
});
