import { and, eq, inArray } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { deliveries } from '../../src/db/schema.ts';
import { useScenario } from './scenario.ts';
import { waitFor } from '../support/wait.ts';
import { Publisher, report, statusCounts } from './workload.ts';

/**
 * The repair check runs every 5 s here, and looks at deliveries left as they are for 10 s. The
 * open breaker's probes are not spaced, so the dead letters this needs come at the retry
 * schedule's pace (spaced, 20 deliveries take 100 probes, a second each).
 */
const scenario = useScenario('lost-retry-signal', { REPAIR_INTERVAL: '5s', REPAIR_AFTER: '10s', CIRCUIT_BREAKER_PROBE_INTERVAL: '0s' });
const EVENTS = 20;

it('a manual retry committed whose signal never came (its API process died in between) is sent by the repair check', async () => {
  const { cluster, receiver, webhook } = scenario;
  // The endpoint is down for the whole round of every delivery: they all end in dead_letter.
  await receiver.stop();
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: EVENTS });
  await publisher.done;
  await waitFor('every delivery to dead-letter', async () => (await statusCounts(cluster, webhook.webhookId)).dead_letter === EVENTS, {
    timeoutMs: 120_000,
    intervalMs: 500,
  });
  await receiver.start();

  // What a manual retry's API process leaves when it dies between its commit and its signal:
  // the deliveries `pending`, their workflows still waiting in their dead letters.
  const crashedAt = Date.now();
  const rows = await cluster.db.select({ id: deliveries.id }).from(deliveries).where(eq(deliveries.webhookId, webhook.webhookId));
  const stuck = rows.slice(0, 5).map((row) => row.id);
  await cluster.db
    .update(deliveries)
    .set({ status: 'pending', nextRetryAt: null, updatedAt: new Date() })
    .where(and(inArray(deliveries.id, stuck), eq(deliveries.status, 'dead_letter')));

  await waitFor(
    'the repair check to deliver them',
    async () => {
      const delivered = await cluster.db.select({ id: deliveries.id }).from(deliveries).where(and(inArray(deliveries.id, stuck), eq(deliveries.status, 'delivered')));
      return delivered.length === stuck.length;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  const repairedAt = Date.now();
  const metrics = await (await fetch(cluster.workerMetricsUrl)).text();
  expect(metrics).toMatch(/webhook_repairs_total\{problem="pending_retry_lost"\} 5/);
  const counts = await statusCounts(cluster, webhook.webhookId);
  expect(counts).toMatchObject({ total: EVENTS, delivered: 5, dead_letter: EVENTS - 5 });
  // Each was sent once, by the retry the check sent again; the others stay where the customer can act on them.
  for (const id of stuck) expect(receiver.seen.get(id)?.count).toBe(1);
  expect(receiver.invalid).toEqual([]);
  expect(await cluster.unexpectedExits()).toEqual([]);
  report('a manual retry whose signal was lost (its API process died between commit and signal)', {
    stuck: stuck.length,
    repairedAfterMs: repairedAt - crashedAt,
    counts,
  });
}, 300_000);
