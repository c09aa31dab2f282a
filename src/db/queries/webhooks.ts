import { and, asc, eq, ne, sql } from 'drizzle-orm';
import type { Database } from '../client.ts';
import { preparedPerDatabase } from '../prepared.ts';
import { deliveries, webhooks, type WebhookRow } from '../schema.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secrets.ts';

/** Fields a customer sets on a webhook. */
export interface WebhookInput {
  apiKeyId: string;
  url: string;
  events: string[];
  headers: Record<string, string>;
  /** Deliveries per second at most; undefined or null: no limit. */
  rateLimit?: number | null | undefined;
}

/** Inserts a new, active webhook whose secret is already sealed. */
export async function insertWebhook(
  db: Database,
  projectId: string,
  input: WebhookInput & { secretSealed: string },
): Promise<WebhookRow> {
  const now = new Date();
  const [row] = await db
    .insert(webhooks)
    .values({
      id: newId('webhook', now.getTime()),
      projectId,
      apiKeyId: input.apiKeyId,
      url: input.url,
      events: input.events,
      headers: input.headers,
      rateLimit: input.rateLimit ?? null,
      status: 'active',
      secretSealed: input.secretSealed,
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return row!;
}

/** The webhooks of a project, oldest first. */
export async function listWebhooks(db: Database, projectId: string): Promise<WebhookRow[]> {
  return db.select().from(webhooks).where(eq(webhooks.projectId, projectId)).orderBy(asc(webhooks.id));
}

/** A webhook by id, whatever its project. */
export async function findWebhook(db: Database, id: string): Promise<WebhookRow | undefined> {
  const [row] = await db.select().from(webhooks).where(eq(webhooks.id, id));
  return row;
}

/**
 * Applies a partial update and bumps `updated_at`. A new `secretSealed` replaces the
 * secret in this one statement, so every later send, pending retries included, uses it.
 */
export async function updateWebhook(
  db: Database,
  id: string,
  changes: Partial<Pick<WebhookRow, 'url' | 'events' | 'headers' | 'status' | 'secretSealed' | 'rateLimit'>>,
): Promise<WebhookRow | undefined> {
  // Re-enabling clears the service's reason and restarts the endpoint-health clock.
  const reenabled = changes.status === 'active' ? { disabledReason: null, disabledAt: null, failingSince: null } : {};
  const [row] = await db
    .update(webhooks)
    .set({ ...changes, ...reenabled, updatedAt: new Date() })
    .where(eq(webhooks.id, id))
    .returning();
  return row;
}

/**
 * Deletes a webhook with its deliveries and attempts; returns the ids of the deliveries
 * that were not yet delivered, whose workflows the caller cancels.
 */
export async function deleteWebhook(db: Database, id: string): Promise<string[] | undefined> {
  return db.transaction(async (tx) => {
    const open = await tx
      .select({ id: deliveries.id })
      .from(deliveries)
      .where(and(eq(deliveries.webhookId, id), ne(deliveries.status, 'delivered')));
    const removed = await tx.delete(webhooks).where(eq(webhooks.id, id)).returning({ id: webhooks.id });
    return removed.length === 0 ? undefined : open.map((row) => row.id);
  });
}

/** The active webhooks of a project subscribed to `event`. */
export async function listSubscribedWebhooks(
  db: Database,
  projectId: string,
  event: string,
): Promise<Pick<WebhookRow, 'id' | 'url'>[]> {
  return subscribedWebhooksStatement(db).execute({ projectId, event });
}

const subscribedWebhooksStatement = preparedPerDatabase((db) =>
  db
    .select({ id: webhooks.id, url: webhooks.url })
    .from(webhooks)
    .where(
      and(
        eq(webhooks.projectId, sql.placeholder('projectId')),
        eq(webhooks.status, 'active'),
        sql`${webhooks.events} @> array[${sql.placeholder('event')}]::text[]`,
      ),
    )
    .orderBy(asc(webhooks.id))
    .prepare('subscribed_webhooks'),
);

/**
 * Re-encrypts, under the box's current key, every webhook secret sealed with an older key
 * (after SECRET_ENCRYPTION_KEY was rotated). Each row is locked while it is resealed, so a
 * concurrent rotate-secret is never overwritten. Returns how many were resealed.
 */
export async function resealWebhookSecrets(db: Database, box: SecretBox): Promise<number> {
  const rows = await db.select({ id: webhooks.id, secretSealed: webhooks.secretSealed }).from(webhooks);
  let resealed = 0;
  for (const row of rows.filter((candidate) => box.sealedWithOldKey(candidate.secretSealed))) {
    resealed += await db.transaction(async (tx) => {
      const [current] = await tx
        .select({ secretSealed: webhooks.secretSealed })
        .from(webhooks)
        .where(eq(webhooks.id, row.id))
        .for('update');
      if (!current || !box.sealedWithOldKey(current.secretSealed)) return 0;
      await tx
        .update(webhooks)
        .set({ secretSealed: box.seal(box.open(current.secretSealed)) })
        .where(eq(webhooks.id, row.id));
      return 1;
    });
  }
  return resealed;
}
