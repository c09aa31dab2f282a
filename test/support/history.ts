import { eq, sql } from 'drizzle-orm';
import { queryRows, type Database } from '../../src/db/client.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { recordEvent } from '../../src/db/queries/events.ts';
import { insertWebhook } from '../../src/db/queries/webhooks.ts';
import { deliveries, deliveryAttempts, events, type DeliveryStatus } from '../../src/db/schema.ts';
import { newId } from '../../src/ids.ts';
import type { SecretBox } from '../../src/secrets/crypto.ts';
import { docauthData } from './event-data.ts';

const DAY_MS = 86_400_000;

/** A project with `webhooks` active webhooks subscribed to `docauth.completed`. */
export async function seedProject(db: Database, box: SecretBox, webhooks = 1): Promise<{ projectId: string; webhookIds: string[] }> {
  const projectId = `prj_${newId('apiKey').slice(-10)}`;
  const { key } = await createApiKey(db, { projectId, services: ['webhooks'] });
  const webhookIds: string[] = [];
  for (let i = 0; i < webhooks; i += 1) {
    const webhook = await insertWebhook(db, box, projectId, {
      apiKeyId: key.id,
      url: `https://example.com/hook-${i}`,
      events: ['docauth.completed'],
      headers: {},
      secret: 'whsec_test',
    });
    webhookIds.push(webhook.id);
  }
  return { projectId, webhookIds };
}

/** Where a seeded delivery stands: its status and how many days ago it last changed. */
export interface PastDelivery {
  status: DeliveryStatus;
  updatedDaysAgo: number;
  attempts?: number;
}

/**
 * Publishes one event to the project (through `recordEvent`, payload sealed), created
 * `eventDaysAgo` days before `now`, and moves each of its deliveries (one per webhook, in
 * webhook order) to the given state with that many attempt rows. Returns the ids.
 */
export async function seedPastEvent(
  db: Database,
  box: SecretBox,
  projectId: string,
  now: Date,
  eventDaysAgo: number,
  states: PastDelivery[],
): Promise<{ eventId: string; deliveryIds: string[] }> {
  const recorded = await recordEvent(db, box, {
    projectId,
    producerEventId: newId('event'),
    event: 'docauth.completed',
    occurredAt: now,
    payload: docauthData(),
  });
  const eventId = recorded.event.id;
  const ago = (days: number) => new Date(now.getTime() - days * DAY_MS);
  await db.update(events).set({ createdAt: ago(eventDaysAgo), dispatchedAt: ago(eventDaysAgo) }).where(eq(events.id, eventId));
  const ordered = [...recorded.deliveries].sort((a, b) => a.webhookId.localeCompare(b.webhookId));
  if (ordered.length !== states.length) throw new Error(`the project has ${ordered.length} webhooks, ${states.length} states given`);
  for (const [index, target] of ordered.entries()) {
    const state = states[index]!;
    const attempts = state.attempts ?? (state.status === 'pending' ? 0 : 1);
    await db
      .update(deliveries)
      .set({ status: state.status, attemptCount: attempts, updatedAt: ago(state.updatedDaysAgo) })
      .where(eq(deliveries.id, target.deliveryId));
    for (let number = 1; number <= attempts; number += 1) {
      await db.insert(deliveryAttempts).values({
        id: newId('attempt'),
        deliveryId: target.deliveryId,
        attemptNumber: number,
        startedAt: ago(state.updatedDaysAgo),
        durationMs: 12,
        statusCode: 200,
        outcome: 'succeeded',
      });
    }
  }
  return { eventId, deliveryIds: ordered.map((target) => target.deliveryId) };
}

/** The ids of every event, delivery and attempt in the database, sorted. */
export async function storedIds(db: Database): Promise<{ events: string[]; deliveries: string[]; attempts: string[] }> {
  const ids = async (table: string) =>
    (await queryRows<{ id: string }>(db, sql.raw(`select id from ${table} order by id`))).map((row) => row.id);
  return { events: await ids('events'), deliveries: await ids('deliveries'), attempts: await ids('delivery_attempts') };
}

/** The ids of the attempts of the given deliveries. */
export async function attemptIdsOf(db: Database, deliveryIds: string[]): Promise<string[]> {
  if (deliveryIds.length === 0) return [];
  const rows = await db.select({ id: deliveryAttempts.id, deliveryId: deliveryAttempts.deliveryId }).from(deliveryAttempts);
  return rows.filter((row) => deliveryIds.includes(row.deliveryId)).map((row) => row.id).sort();
}
