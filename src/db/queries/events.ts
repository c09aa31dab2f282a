import { randomBytes } from 'node:crypto';
import { and, asc, eq, gt, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import { isForeignKeyViolation, type Database } from '../client.ts';
import { preparedPerDatabase } from '../prepared.ts';
import { deliveries, events, webhooks, type EventRow } from '../schema.ts';
import { CROCKFORD_DIGITS, idTimePrefix, newId } from '../../ids.ts';
import { openPayload, requestIdHashes, sealPayload } from '../sealing.ts';
import type { SecretBox } from '../../secrets/crypto.ts';

/** An event as a producer hands it in. */
export interface NewEvent {
  projectId: string;
  /** The producer's idempotency key; a fresh one is made when absent. */
  producerEventId?: string | undefined;
  event: string;
  occurredAt: Date;
  payload: Record<string, unknown>;
  /** Deliver to this webhook only (a test event); nothing is stored unless it is active and subscribed. */
  onlyWebhookId?: string | undefined;
  /** The trace context of the request that accepts it (`traceparent`), kept for the repair check. */
  traceparent?: string | undefined;
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

/** A test event's webhook was not active and subscribed when the event was to be stored: nothing was. */
export class WebhookNotDeliverableError extends Error {
  readonly webhookId: string;

  constructor(webhookId: string) {
    super(`webhook ${webhookId} is not active; no event was stored`);
    this.name = 'WebhookNotDeliverableError';
    this.webhookId = webhookId;
  }
}

/** The event a producer key named was there for the insert and gone for the read that followed. */
class EventGoneError extends Error {}

/**
 * Base64's 64 digits, and the Crockford base32 digit each stands for: every one of the 32 twice, so
 * 16 digits of a hash's base64 (96 bits) make an identifier's 16 random digits (80 bits, evenly).
 */
const BASE64_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const CROCKFORD_TWICE = CROCKFORD_DIGITS + CROCKFORD_DIGITS;

/**
 * Tries of {@link recordEvent} when a row it relied on is deleted under it: a webhook it chose,
 * or the earlier event of the same producer key.
 */
const RECORD_TRIES = 3;

/**
 * Stores an event, its payload sealed with `box`, and one `pending` delivery per active,
 * subscribed webhook of its project, in one statement (atomic without a transaction block) that
 * also chooses the webhooks, however many there are. The database names the deliveries, in
 * `newId`'s layout: the time part of the event's, and 16 random digits from a hash of a random
 * value of the event's and the webhook's id. Publishing the same producer key again (also
 * concurrently) returns the first event and its deliveries unchanged. A webhook deleted while
 * the statement runs fails it (nothing is stored), and it runs again; so does the whole when the
 * earlier event of the key is deleted (by the retention sweep) as it is read. With
 * `onlyWebhookId` (a test event) and that webhook not active and subscribed, nothing is stored
 * and {@link WebhookNotDeliverableError} is thrown.
 */
export async function recordEvent(db: Database, box: SecretBox, input: NewEvent): Promise<RecordedEvent> {
  for (let tries = 1; ; tries += 1) {
    try {
      return await recordEventOnce(db, box, input);
    } catch (error) {
      if (tries >= RECORD_TRIES || !(isForeignKeyViolation(error) || error instanceof EventGoneError)) throw error;
    }
  }
}

async function recordEventOnce(db: Database, box: SecretBox, input: NewEvent): Promise<RecordedEvent> {
  const now = new Date();
  const id = newId('event', now.getTime());
  const stored: EventRow = {
    id,
    projectId: input.projectId,
    producerEventId: input.producerEventId ?? id,
    event: input.event,
    occurredAt: input.occurredAt,
    ...sealPayload(box, id, input.projectId, input.payload),
    payloadLegacy: null,
    erasedAt: null,
    createdAt: now,
    dispatchedAt: null,
    traceparent: input.traceparent ?? null,
  };
  // One row per delivery created, or one with no delivery for an event stored without any; none
  // when nothing was stored (the key was seen before, or a test event's webhook is not deliverable).
  const rows = await recordEventStatement(db).execute({
    id: stored.id,
    projectId: stored.projectId,
    producerEventId: stored.producerEventId,
    event: stored.event,
    occurredAt: stored.occurredAt.toISOString(),
    payloadSealed: stored.payloadSealed,
    requestIdHash: stored.requestIdHash,
    at: now.toISOString(),
    traceparent: stored.traceparent,
    onlyWebhookId: input.onlyWebhookId ?? null,
    deliveryIdPrefix: idTimePrefix('delivery', now.getTime()),
    deliveryIdSeed: randomBytes(16).toString('hex'),
  });
  if (rows.length > 0) {
    const deliveries = rows.flatMap((row) => (row.deliveryId ? [{ deliveryId: row.deliveryId, webhookId: row.webhookId!, url: row.url! }] : []));
    return { event: stored, deliveries, created: true };
  }
  const [existing] = await db
    .select()
    .from(events)
    .where(and(eq(events.projectId, stored.projectId), eq(events.producerEventId, stored.producerEventId)));
  if (!existing) {
    // Nothing stored and no earlier event of the key: the test event's webhook was not deliverable.
    if (input.onlyWebhookId !== undefined) throw new WebhookNotDeliverableError(input.onlyWebhookId);
    // Deleted between the two statements (the retention sweep took it): it is published anew.
    throw new EventGoneError();
  }
  return { event: existing, deliveries: await deliveriesOf(db, existing.id), created: false };
}

/**
 * {@link recordEventOnce}'s statement, prepared once per database handle (it is on every publish):
 * the webhooks subscribed, the event inserted, the deliveries named and inserted, as CTEs.
 */
const recordEventStatement = preparedPerDatabase((db) => {
  const value = (name: string) => sql.placeholder(name);
  const at = sql`${value('at')}::timestamptz`;
  const only = sql`${value('onlyWebhookId')}::text`;
  const subscribed = db.$with('subscribed', { id: sql<string>`id`.as('id'), url: sql<string>`url`.as('url') }).as(sql`
    select id, url from webhooks
    where project_id = ${value('projectId')} and status = 'active' and events @> array[${value('event')}]::text[]
      and (${only} is null or id = ${only})`);
  const inserted = db.$with('inserted', { id: sql<string>`id`.as('id') }).as(sql`
    insert into events (id, project_id, producer_event_id, event, occurred_at, payload_sealed, request_id_hash, created_at, traceparent)
    select ${value('id')}, ${value('projectId')}, ${value('producerEventId')}, ${value('event')}, ${value('occurredAt')}::timestamptz,
           ${value('payloadSealed')}, ${value('requestIdHash')}, ${at}, ${value('traceparent')}
    where ${only} is null or exists (select from subscribed)
    on conflict (project_id, producer_event_id) do nothing
    returning id`);
  // Referenced twice, so computed once (PostgreSQL materialises it).
  const targets = db.$with('targets', {
    deliveryId: sql<string>`delivery_id`.as('delivery_id'),
    webhookId: sql<string>`webhook_id`.as('webhook_id'),
    url: sql<string>`url`.as('url'),
  }).as(sql`
    select ${value('deliveryIdPrefix')}::text
             || translate(substr(encode(sha256(convert_to(${value('deliveryIdSeed')}::text || id, 'UTF8')), 'base64'), 1, 16), ${BASE64_DIGITS}, ${CROCKFORD_TWICE})
             as delivery_id, id as webhook_id, url
    from subscribed where exists (select from inserted)`);
  // Run for its effect: it returns nothing and declares no column (the rows come back from targets).
  const created = db.$with('created', {}).as(sql`
    insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
    select targets.delivery_id, targets.webhook_id, inserted.id, ${value('event')}, 'pending', 0, ${at}, ${at}
    from inserted cross join targets`);
  return db
    .with(subscribed, inserted, targets, created)
    .select({ deliveryId: targets.deliveryId, webhookId: targets.webhookId, url: targets.url })
    .from(inserted)
    .leftJoin(targets, sql`true`)
    .orderBy(targets.webhookId)
    .prepare('record_event');
});

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
  await markDispatchedStatement(db).execute({ eventId, at: new Date().toISOString() });
}

const markDispatchedStatement = preparedPerDatabase((db) =>
  db
    .update(events)
    .set({ dispatchedAt: sql`${sql.placeholder('at')}::timestamptz` })
    .where(eq(events.id, sql.placeholder('eventId')))
    .prepare('mark_event_dispatched'),
);

/**
 * Events accepted before `before` whose delivery workflows were not all started (the process
 * that accepted them stopped in between): at most `perProject` of each project, the oldest of
 * each first, `limit` in all; so one project's many do not hold back another's.
 */
export async function listUndispatchedEvents(
  db: Database,
  before: Date,
  limit: number,
  perProject: number,
): Promise<{ event: EventRow; deliveries: DeliveryTarget[] }[]> {
  const ranked = db.$with('ranked').as(
    db
      .select({
        id: events.id,
        rank: sql<number>`row_number() over (partition by ${events.projectId} order by ${events.createdAt})`.as('rank'),
        createdAt: events.createdAt,
      })
      .from(events)
      .where(and(isNull(events.dispatchedAt), lt(events.createdAt, before))),
  );
  const rows = await db
    .with(ranked)
    .select({ event: events })
    .from(ranked)
    .innerJoin(events, eq(events.id, ranked.id))
    .where(sql`${ranked.rank} <= ${perProject}`)
    .orderBy(asc(ranked.rank), asc(ranked.createdAt))
    .limit(limit);
  return Promise.all(rows.map(async ({ event }) => ({ event, deliveries: await deliveriesOf(db, event.id) })));
}

/** What {@link resealEventPayloads} did. */
export interface PayloadReseal {
  resealed: number;
  /** Events whose payload does not open (altered, or under a key not configured), left as they are. */
  unopenable: string[];
}

/**
 * Seals again, under the box's current key, every payload sealed with an older key, and seals
 * the payloads that releases before sealing stored in clear (clearing them), `batchSize` rows
 * per transaction, in id order; the request-id lookup hashes are remade with them. A payload
 * that does not open is left as it is and reported, and the rest go on.
 */
export async function resealEventPayloads(db: Database, box: SecretBox, batchSize = 500): Promise<PayloadReseal> {
  const currentPrefix = `v1:${box.currentKeyId}:%`;
  const result: PayloadReseal = { resealed: 0, unopenable: [] };
  for (let after = ''; ; ) {
    const last = await db.transaction(async (tx) => {
      const rows = await tx
        .select({ id: events.id, projectId: events.projectId, payloadSealed: events.payloadSealed, payloadLegacy: events.payloadLegacy })
        .from(events)
        .where(
          and(
            gt(events.id, after),
            sql`(${events.payloadLegacy} is not null or (${events.payloadSealed} is not null and ${events.payloadSealed} not like ${currentPrefix}))`,
          ),
        )
        .orderBy(asc(events.id))
        .limit(batchSize)
        .for('update');
      for (const row of rows) {
        let data: Record<string, unknown>;
        try {
          data = openPayload(box, row)!;
        } catch {
          result.unopenable.push(row.id);
          continue;
        }
        await tx
          .update(events)
          .set({ ...sealPayload(box, row.id, row.projectId, data), payloadLegacy: null })
          .where(eq(events.id, row.id));
        result.resealed += 1;
      }
      return rows.length < batchSize ? undefined : rows.at(-1)!.id;
    });
    if (last === undefined) return result;
    after = last;
  }
}

/** Which events of a project an erasure is for: a producer's event id, or the `data.request_id` they carry. */
export type ErasureMatch = { producerEventId: string } | { requestId: string };

/** An event whose payload was erased, and its deliveries (which keep their metadata). */
export interface ErasedEvent {
  eventId: string;
  producerEventId: string;
  erasedAt: Date;
  deliveryIds: string[];
}

/**
 * Erases the payload of the matching events of a project at once: the sealed data, any clear
 * data of an earlier release and the request-id lookup hash are removed, `erased_at` is set
 * (kept from the first erasure on a repeat). The events and their deliveries stay, so the
 * delivery list still tells what was sent and when; a later send of such a delivery sends
 * nothing and ends `dead_letter` (`startAttempt`).
 */
export async function eraseEventPayloads(db: Database, box: SecretBox, projectId: string, match: ErasureMatch): Promise<ErasedEvent[]> {
  const which =
    'producerEventId' in match
      ? eq(events.producerEventId, match.producerEventId)
      : or(
          inArray(events.requestIdHash, requestIdHashes(box, projectId, match.requestId)),
          // An event an earlier release stored in clear has no lookup hash until `secrets reseal`.
          and(isNull(events.requestIdHash), sql`${events.payloadLegacy}->>'request_id' = ${match.requestId}`),
        );
  const erased = await db
    .update(events)
    .set({ payloadSealed: null, payloadLegacy: null, requestIdHash: null, erasedAt: sql`coalesce(${events.erasedAt}, now())` })
    .where(and(eq(events.projectId, projectId), which))
    .returning({ eventId: events.id, producerEventId: events.producerEventId, erasedAt: events.erasedAt });
  if (erased.length === 0) return [];
  const rows = await db
    .select({ eventId: deliveries.eventId, deliveryId: deliveries.id })
    .from(deliveries)
    .where(inArray(deliveries.eventId, erased.map((event) => event.eventId)))
    .orderBy(asc(deliveries.id));
  return erased.map((event) => ({
    ...event,
    erasedAt: event.erasedAt!,
    deliveryIds: rows.filter((row) => row.eventId === event.eventId).map((row) => row.deliveryId),
  }));
}
