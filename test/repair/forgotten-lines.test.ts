import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { markEventDispatched, recordEvent } from '../../src/db/queries/events.ts';
import { acquireSendPlaces, releaseClosedDelivery, releaseSendPlaces } from '../../src/flow-control/places.ts';
import { wakeForgottenLines } from '../../src/repair/forgotten-lines.ts';
import { createWebhookFor, publishFor, waitForDelivery } from '../delivery/support.ts';
import { waitFor } from '../support/wait.ts';
import { docauthData, harnessWithReceiver } from '../support/harness.ts';

/** One send at a time per webhook: a line forms behind the one held. */
const ONE_PLACE = { webhookMaxInFlight: 1, projectMaxInFlight: 100, destinationMaxInFlight: 100 };
/** The turn reservation of the dead worker's calls below: short, so that the test need not wait the worker's minute. */
const RESERVE_MS = 2_000;

const started = harnessWithReceiver({ flow: ONE_PLACE });

const lineOf = (webhookId: string) =>
  queryRows<{ delivery_id: string; woken_until: Date | null }>(started.harness.db, sql`select delivery_id, woken_until from send_waiters where webhook_id = ${webhookId} order by seq`);

it('a worker that dies between giving back places and sending the wake signals leaves its line waiting; the repair check wakes it', async () => {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  // The dead worker's send: it holds the webhook's one place.
  const stored = await recordEvent(h.db, h.secretBox, { projectId: key.projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData(), onlyWebhookId: webhookId });
  await markEventDispatched(h.db, stored.event.id);
  const dead = stored.deliveries[0]!.deliveryId;
  const limits = { ...ONE_PLACE, holdMs: 60_000, reserveMs: RESERVE_MS };
  expect((await acquireSendPlaces(h.db, dead, 'dead-worker/1', limits)).decision).toBe('granted');

  // Three deliveries wait in line behind it, in their workflows: the first asks again after
  // 30 s, the two behind it (past the webhook's one place) only after 15 minutes.
  const waiting: string[] = [];
  for (let i = 0; i < 3; i += 1) waiting.push(...(await publishFor(h, key.projectId)).delivery_ids);
  await waitFor('the three to wait in line', async () => (await lineOf(webhookId)).length === 3, { timeoutMs: 20_000, intervalMs: 100 });
  const [first, second] = (await lineOf(webhookId)).map((row) => row.delivery_id) as [string, string];

  // The dead worker's last moments: its send ended and gave its place back, which woke the
  // next in line; the first in line gave up its place there (its workflow moved on); and the
  // worker died before any wake signal went out.
  expect(await releaseSendPlaces(h.db, dead, 'dead-worker/1', limits)).toEqual([first]);
  expect(await releaseClosedDelivery(h.db, first, limits)).toEqual([second]);

  // The place is free, yet nothing moves until a waiter's own recheck comes round (30 s for
  // the one that was first, 15 minutes for the others).
  await new Promise((resolve) => setTimeout(resolve, 12_000));
  expect(receiver.requests).toHaveLength(0);
  expect((await lineOf(webhookId)).length).toBeGreaterThan(0);

  // The repair check wakes the head nobody will wake; the line then moves by itself.
  expect(await wakeForgottenLines({ db: h.db, scheduler: h.scheduler, limits: { ...ONE_PLACE, holdMs: 60_000, reserveMs: 60_000 } })).toBe(1);
  for (const id of waiting) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered', 30_000);
  expect(await lineOf(webhookId)).toEqual([]);
  expect(await wakeForgottenLines({ db: h.db, scheduler: h.scheduler, limits: { ...ONE_PLACE, holdMs: 60_000, reserveMs: 60_000 } })).toBe(0);
}, 90_000);
