import { and, asc, eq, isNull, lt } from 'drizzle-orm';
import type { Database } from '../client.ts';
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
 * project, in one transaction. Publishing the same producer key again (also concurrently)
 * returns the first event and its deliveries unchanged.
 */
export async function recordEvent(db: Database, input: NewEvent): Promise<RecordedEvent> {
  return db.transaction(async (tx) => {
    const now = new Date();
    const id = newId('event', now.getTime());
    const [inserted] = await tx
      .insert(events)
      .values({
        id,
        projectId: input.projectId,
        producerEventId: input.producerEventId ?? id,
        event: input.event,
        occurredAt: input.occurredAt,
        payload: input.payload,
        createdAt: now,
      })
      .onConflictDoNothing({ target: [events.projectId, events.producerEventId] })
      .returning();
    if (!inserted) {
      const [existing] = await tx
        .select()
        .from(events)
        .where(
          and(
            eq(events.projectId, input.projectId),
            eq(events.producerEventId, input.producerEventId ?? id),
          ),
        );
      return { event: existing!, deliveries: await deliveriesOf(tx, existing!.id), created: false };
    }
    const subscribed = await listSubscribedWebhooks(tx, input.projectId, input.event);
    const targets = subscribed.map((webhook) => ({
      deliveryId: newId('delivery', now.getTime()),
      webhookId: webhook.id,
      url: webhook.url,
    }));
    if (targets.length === 0) return { event: inserted, deliveries: [], created: true };
    await tx
      .insert(deliveries)
      .values(
        targets.map(({ deliveryId, webhookId }) => ({
          id: deliveryId,
          webhookId,
          eventId: inserted.id,
          event: input.event,
          status: 'pending' as const,
          createdAt: now,
          updatedAt: now,
        })),
      );
    return { event: inserted, deliveries: targets, created: true };
  });
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
