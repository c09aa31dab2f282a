import { randomBytes } from 'node:crypto';
import { and, eq, inArray } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { markEventDispatched, recordEvent } from '../../src/db/queries/events.ts';
import { deliveries } from '../../src/db/schema.ts';
import { acquireSendPlaces, releaseSendPlaces } from '../../src/flow-control/places.ts';
import { SecretBox } from '../../src/secrets/crypto.ts';
import { useScenario } from './scenario.ts';
import { waitFor } from '../support/wait.ts';
import { docauthData, Publisher, report, statusCounts } from './workload.ts';

const ENCRYPTION_KEY = randomBytes(32).toString('base64');
/**
 * One send at a time to the endpoint, so a line forms behind the one place. The repair check
 * runs every 5 s; the bound below is what docs/reliability.md derives for a line whose waker
 * died, with these settings.
 */
const scenario = useScenario('dead-waker', { ENDPOINT_MAX_IN_FLIGHT: '1', REPAIR_INTERVAL: '5s', SECRET_ENCRYPTION_KEY: ENCRYPTION_KEY });
const WAITING = 3;
/**
 * docs/reliability.md's bound: the turn the dead worker gave (a 60 s reservation nobody will
 * use) lapses, then within one repair interval (5 s here) the check wakes the line's head;
 * 25 s more for the line's two sends, one at a time, and their workflow tasks.
 */
const BOUND_MS = 60_000 + 5_000 + 25_000;

it('a worker that dies between giving back its place and sending the wake signal: the line behind it is sent within the bound', async () => {
  const { cluster, receiver, webhook } = scenario;
  const box = new SecretBox(ENCRYPTION_KEY);
  // The dying worker's delivery: recorded as the API records one, its workflow never started
  // (the worker that ran it is gone), holding the endpoint's one place.
  const stored = await recordEvent(cluster.db, box, { projectId: webhook.projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData('req_dead_worker') });
  await markEventDispatched(cluster.db, stored.event.id);
  const dead = stored.deliveries[0]!.deliveryId;
  const limits = { webhookMaxInFlight: 1, projectMaxInFlight: 100, destinationMaxInFlight: 200, holdMs: 60_000, reserveMs: 60_000 };
  expect((await acquireSendPlaces(cluster.db, dead, 'dead-worker/1', limits)).decision).toBe('granted');

  // Deliveries published through the API wait in line behind it, in their workflows.
  const publisher = new Publisher({ cluster, webhook, count: WAITING, ratePerSecond: WAITING });
  await publisher.done;
  const waiting = (await cluster.db.select({ id: deliveries.id }).from(deliveries).where(eq(deliveries.webhookId, webhook.webhookId)))
    .map((row) => row.id)
    .filter((id) => id !== dead);
  expect(waiting).toHaveLength(WAITING);
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  expect(receiver.seen.size).toBe(0);

  // The worker's last moments: its send ended and it gave the place back, which gave the
  // next in line its turn; the first in line, sent by the same worker, gave its place back
  // in turn; and the worker died before any wake signal went out.
  const [first] = await releaseSendPlaces(cluster.db, dead, 'dead-worker/1', limits);
  expect(first).toBeDefined();
  expect((await acquireSendPlaces(cluster.db, first!, 'dead-worker/2', limits)).decision).toBe('granted');
  await releaseSendPlaces(cluster.db, first!, 'dead-worker/2', limits);
  await cluster.db.update(deliveries).set({ status: 'delivered', deliveredAt: new Date() }).where(inArray(deliveries.id, [dead, first!]));
  const diedAt = Date.now();

  const rest = waiting.filter((id) => id !== first);
  await waitFor(
    'the line behind the dead worker to be delivered',
    async () => {
      const delivered = await cluster.db.select({ id: deliveries.id }).from(deliveries).where(and(inArray(deliveries.id, rest), eq(deliveries.status, 'delivered')));
      return delivered.length === rest.length;
    },
    { timeoutMs: BOUND_MS, intervalMs: 250 },
  );
  const sentAfterMs = Date.now() - diedAt;
  for (const id of rest) expect(receiver.seen.get(id)?.count).toBe(1);
  expect(receiver.invalid).toEqual([]);
  expect(await cluster.unexpectedExits()).toEqual([]);
  report('a worker died between giving back its place and sending the wake signal', {
    waiting: rest.length,
    sentAfterMs,
    counts: await statusCounts(cluster, webhook.webhookId),
  });
}, 180_000);
