import { expect, it } from 'vitest';
import { and, eq, isNull } from 'drizzle-orm';
import { recordEvent } from '../../src/db/queries/events.ts';
import { events } from '../../src/db/schema.ts';
import { dispatchUndispatchedEvents, OUTBOX_BATCH } from '../../src/repair/outbox.ts';
import { repairWorkflow } from '../../workflows/repair.ts';
import { docauthData, harnessWithReceiver } from '../support/harness.ts';
import { createWebhookFor, waitForDelivery } from './support.ts';

const started = harnessWithReceiver();

it('starts the deliveries of an event whose publisher stopped between storing it and starting its workflows', async () => {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  // What a process that crashed right after the database commit leaves behind:
  const stored = await recordEvent(h.db, h.secretBox, {
    projectId: key.projectId,
    producerEventId: 'crash-1',
    event: 'docauth.completed',
    occurredAt: new Date(),
    payload: docauthData(),
  });
  const [deliveryId] = stored.deliveries.map((target) => target.deliveryId);
  expect(await h.client.workflow.getHandle(deliveryId!).describe().catch(() => 'none')).toBe('none');

  expect(await dispatchUndispatchedEvents(h, 60_000)).toEqual({ dispatched: 0, more: false }); // too young: its publisher may still be starting it
  expect(await dispatchUndispatchedEvents(h, 0)).toEqual({ dispatched: 1, more: false });
  await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
  const [row] = await h.db.select().from(events).where(eq(events.id, stored.event.id));
  expect(row!.dispatchedAt).toBeInstanceOf(Date);
  expect(await dispatchUndispatchedEvents(h, 0)).toEqual({ dispatched: 0, more: false });

  // The producer publishing again with the same id gets the same ids and nothing is sent twice.
  const again = await h.publish({ id: 'crash-1', project_id: key.projectId, event: 'docauth.completed', data: docauthData() });
  expect(again.body.data).toEqual({ event_id: stored.event.id, delivery_ids: [deliveryId] });
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(receiver.requests.filter((r) => r.headers['x-service-delivery-id'] === deliveryId)).toHaveLength(1);
});

it("starts undispatched events fairly across projects: one project's backlog does not hold back another's", async () => {
  const { harness: h, receiver } = started;
  const busy = await createWebhookFor(h, receiver.url);
  const other = await createWebhookFor(h, receiver.url);
  const store = (projectId: string) =>
    recordEvent(h.db, h.secretBox, { projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData() });
  // More of one project's events left undispatched than one batch takes, all older than the other's one.
  for (let i = 0; i < 101; i += 1) await store(busy.key.projectId);
  const lone = await store(other.key.projectId);

  await dispatchUndispatchedEvents(h, 0);
  const [row] = await h.db.select().from(events).where(eq(events.id, lone.event.id));
  expect(row!.dispatchedAt).toBeInstanceOf(Date);
  // The rest of the backlog follows in the next batches.
  while ((await dispatchUndispatchedEvents(h, 0)).more);
  const left = await h.db.select({ id: events.id }).from(events).where(isNull(events.dispatchedAt));
  expect(left).toEqual([]);
}, 120_000);

it("drains one project's backlog in one run of the repair check, beyond the project's share of a batch", async () => {
  const { harness: h, receiver } = started;
  const { key } = await createWebhookFor(h, receiver.url);
  // What an outage of Temporal leaves for a single project: events stored, their workflows never started.
  const count = OUTBOX_BATCH.perProject * 3 + 1;
  for (let i = 0; i < count; i += 1) {
    await recordEvent(h.db, h.secretBox, { projectId: key.projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData() });
  }
  const result = await h.client.workflow.execute(repairWorkflow, {
    taskQueue: h.taskQueue,
    workflowId: `repair-drain-${key.projectId}`,
    args: [{ undispatchedAfterMs: 0, staleAfterMs: 3_600_000 }],
  });
  expect(result.eventsDispatched).toBeGreaterThanOrEqual(count);
  const left = await h.db.select({ id: events.id }).from(events).where(and(isNull(events.dispatchedAt), eq(events.projectId, key.projectId)));
  expect(left).toEqual([]);
}, 120_000);
