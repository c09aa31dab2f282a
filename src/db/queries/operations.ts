import { and, asc, eq, inArray, isNull, sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';
import { deliveries, operationDeliveries, operations, type DeliveryStatus, type OperationRow, type OperationStatus } from '../schema.ts';
import { newId } from '../../ids.ts';

/** What a bulk retry matches: deliveries of one webhook in these statuses, created in [since, until). */
export interface RetryFilter {
  statuses: DeliveryStatus[];
  since?: Date | undefined;
  until: Date;
}

/** An operation with its counts. */
export interface OperationView extends OperationRow {
  matched: number;
  retried: number;
  skipped: number;
}

/**
 * Creates a running bulk retry operation and records, in the same transaction, every delivery
 * it matches now (later pages retry exactly these, or skip those that moved on).
 */
export async function createRetryOperation(
  db: Database,
  input: { projectId: string; webhookId: string } & RetryFilter,
): Promise<OperationView> {
  const now = new Date();
  const id = newId('operation', now.getTime());
  return db.transaction(async (tx) => {
    const [operation] = await tx
      .insert(operations)
      .values({
        id,
        projectId: input.projectId,
        webhookId: input.webhookId,
        statuses: input.statuses,
        since: input.since ?? null,
        until: input.until,
        status: 'running',
        createdAt: now,
      })
      .returning();
    const statuses = sql.join(input.statuses.map((status) => sql`${status}`), sql`, `);
    const matched = await queryRows<{ n: number }>(
      tx,
      sql`
        with inserted as (
          insert into operation_deliveries (operation_id, delivery_id, state)
          select ${id}, id, 'matched' from deliveries
          where webhook_id = ${input.webhookId} and status in (${statuses})
            and created_at < ${input.until.toISOString()}::timestamptz
            ${input.since ? sql`and created_at >= ${input.since.toISOString()}::timestamptz` : sql``}
          returning 1)
        select count(*)::int as n from inserted`,
    );
    return { ...operation!, matched: matched[0]!.n, retried: 0, skipped: 0 };
  });
}

/** An operation of a webhook, with its counts. */
export async function findOperation(db: Database, webhookId: string, id: string): Promise<OperationView | undefined> {
  const [operation] = await db
    .select()
    .from(operations)
    .where(and(eq(operations.id, id), eq(operations.webhookId, webhookId)));
  if (!operation) return undefined;
  const counts = await db
    .select({ state: operationDeliveries.state, n: sql<number>`count(*)::int` })
    .from(operationDeliveries)
    .where(eq(operationDeliveries.operationId, id))
    .groupBy(operationDeliveries.state);
  const count = (state: string) => counts.find((row) => row.state === state)?.n ?? 0;
  const matched = counts.reduce((sum, row) => sum + row.n, 0);
  return { ...operation, matched, retried: count('retried'), skipped: count('skipped') };
}

/** The next deliveries an operation has still to handle (matched or queued), in id order, with their state and event. */
export async function pendingOperationItems(db: Database, operationId: string, limit: number) {
  return db
    .select({ deliveryId: operationDeliveries.deliveryId, state: operationDeliveries.state, event: deliveries.event })
    .from(operationDeliveries)
    .innerJoin(deliveries, eq(deliveries.id, operationDeliveries.deliveryId))
    .where(and(eq(operationDeliveries.operationId, operationId), inArray(operationDeliveries.state, ['matched', 'queued'])))
    .orderBy(asc(operationDeliveries.deliveryId))
    .limit(limit);
}

/**
 * Moves a matched delivery back to `pending` for the operation's retry, if it is still in one of
 * `statuses`, and marks it `queued`; otherwise marks it `skipped`. Returns whether it was queued.
 */
export async function queueOperationItem(db: Database, operationId: string, deliveryId: string, statuses: DeliveryStatus[]): Promise<boolean> {
  return db.transaction(async (tx) => {
    const moved = await tx
      .update(deliveries)
      .set({ status: 'pending', nextRetryAt: null, updatedAt: new Date() })
      .where(and(eq(deliveries.id, deliveryId), inArray(deliveries.status, statuses)))
      .returning({ id: deliveries.id });
    await tx
      .update(operationDeliveries)
      .set({ state: moved.length > 0 ? 'queued' : 'skipped' })
      .where(and(eq(operationDeliveries.operationId, operationId), eq(operationDeliveries.deliveryId, deliveryId)));
    return moved.length > 0;
  });
}

/** Marks a queued item retried once its delivery workflow has the signal. */
export async function markOperationItemRetried(db: Database, operationId: string, deliveryId: string): Promise<void> {
  await db
    .update(operationDeliveries)
    .set({ state: 'retried' })
    .where(and(eq(operationDeliveries.operationId, operationId), eq(operationDeliveries.deliveryId, deliveryId)));
}

/** Ends a running operation with `status` (a finished one keeps its end). */
export async function finishOperation(db: Database, operationId: string, status: Exclude<OperationStatus, 'running'>): Promise<void> {
  await db
    .update(operations)
    .set({ status, finishedAt: new Date() })
    .where(and(eq(operations.id, operationId), eq(operations.status, 'running'), isNull(operations.finishedAt)));
}

/** An operation by id alone (for its workflow). */
export async function findOperationById(db: Database, id: string): Promise<OperationRow | undefined> {
  const [operation] = await db.select().from(operations).where(eq(operations.id, id));
  return operation;
}
