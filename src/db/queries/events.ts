import { and, asc, eq, isNull, lt, sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';
import { deliveries, events, webhooks, type EventRow } from '../schema.ts';
import { listSubscribedWebhooks } from './webhooks.ts';
import { newId } from '../../ids.ts';

/** An event as a producer hands it in. */
export interface NewEvent {
  projectId: string;
  /** The producer's idempotency key; a fresh one is made when absent. */
  producerEventId?: string | undefined;
  event: string;
  occurredAt: Date;
  payload: Record<string, unknown>;
}

/** A delivery of an event, with what its workflow is started with. */
export interface DeliveryTarget {
  deliveryId: string;
  webhookId: string;
  url: string;
}

/** The stored event and its deliveries. `created` is false when the key was seen before. */
export interface RecordedEvent {
  event: EventRow;
  deliveries: DeliveryTarget[];
  created: boolean;
}

/**
 * Stores an event and one `pending` delivery per active, subscribed webhook of its
 * project, in one statement (atomic without a transaction block). Publishing the same
 * producer key again (also concurrently) returns the first event and its deliveries unchanged.
 */
export async function recordEvent(db: Database, input: NewEvent): Promise<RecordedEvent> {
  const now = new Date();
  const id = newId('event', now.getTime());
  const stored: EventRow = {
    id,
    projectId: input.projectId,
    producerEventId: input.producerEventId ?? id,
    event: input.event,
    occurredAt: input.occurredAt,
    payload: input.payload,
    createdAt: now,
    dispatchedAt: null,
  };
  const subscribed = await listSubscribedWebhooks(db, input.projectId, input.event);
  const targets = subscribed.map((webhook) => ({
    deliveryId: newId('delivery', now.getTime()),
    webhookId: webhook.id,
    url: webhook.url,
  }));
  const at = sql`${now.toISOString()}::timestamptz`;
  const insertEvent = sql`
    insert into events (id, project_id, producer_event_id, event, occurred_at, payload, created_at)
    values (${stored.id}, ${stored.projectId}, ${stored.producerEventId}, ${stored.event},
            ${stored.occurredAt.toISOString()}::timestamptz, ${JSON.stringify(stored.payload)}::jsonb, ${at})
    on conflict (project_id, producer_event_id) do nothing
    returning id`;
  const inserted = await queryRows<{ id: string }>(
    db,
    targets.length === 0
      ? insertEvent
      : sql`
        with inserted as (${insertEvent}), created as (
          insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
          select target.delivery_id, target.webhook_id, inserted.id, ${stored.event}, 'pending', 0, ${at}, ${at}
          from inserted cross join (values ${sql.join(
            targets.map((target) => sql`(${target.deliveryId}, ${target.webhookId})`),
            sql`, `,
          )}) as target (delivery_id, webhook_id)
        )
        select id from inserted`,
  );
  if (inserted.length > 0) return { event: stored, deliveries: targets, created: true };

  const [existing] = await db
    .select()
    .from(events)
    .where(and(eq(events.projectId, stored.projectId), eq(events.producerEventId, stored.producerEventId)));
  return { event: existing!, deliveries: await deliveriesOf(db, existing!.id), created: false };
}

/** The deliveries of an event in webhook order, the order `recordEvent` creates them in. */
async function deliveriesOf(db: Database, eventId: string): Promise<DeliveryTarget[]> {
  return db
    .select({ deliveryId: deliveries.id, webhookId: webhooks.id, url: webhooks.url })
    .from(deliveries)
    .innerJoin(webhooks, eq(webhooks.id, deliveries.webhookId))
    .where(eq(deliveries.eventId, eventId))
    .orderBy(asc(webhooks.id));
}

/** Records that every delivery workflow of the event has been started. */
export async function markEventDispatched(db: Database, eventId: string): Promise<void> {
  await db.update(events).set({ dispatchedAt: new Date() }).where(eq(events.id, eventId));
}

/**
 * Events accepted before `before` whose delivery workflows were not all started
 * (the process that accepted them stopped in between), oldest first.
 */
export async function listUndispatchedEvents(
  db: Database,
  before: Date,
  limit: number,
): Promise<{ event: EventRow; deliveries: DeliveryTarget[] }[]> {
  const rows = await db
    .select()
    .from(events)
    .where(and(isNull(events.dispatchedAt), lt(events.createdAt, before)))
    .orderBy(asc(events.createdAt))
    .limit(limit);
  return Promise.all(
    rows.map(async (event) => ({ event, deliveries: await deliveriesOf(db, event.id) })),
  );
}
