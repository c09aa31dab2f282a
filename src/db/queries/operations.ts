import { and, asc, eq, inArray, isNull, lt, sql, type SQL } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';
import { deliveries, operationDeliveries, operations, type DeliveryStatus, type OperationRow, type OperationStatus } from '../schema.ts';
import { firstIdAt, newId } from '../../ids.ts';

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

/** Why a bulk retry could not be created. */
export type OperationRefusal =
  /** The webhook has a running operation already: this one. */
  | { running: string }
  /** The project has as many running operations as it may. */
  | { projectLimit: number };

/**
 * Creates a running bulk retry operation of a webhook: its filter only, no delivery yet (its
 * workflow selects the matching deliveries in pages). Refused while the webhook has a running
 * operation, or the project `maxPerProject` of them; the checks and the insert run under a lock
 * of the project's (a transaction-scoped advisory lock), so requests arriving together cannot
 * pass them, and other projects never wait on it.
 */
export async function createRetryOperation(
  db: Database,
  input: { projectId: string; webhookId: string } & RetryFilter,
  maxPerProject: number,
): Promise<OperationView | OperationRefusal> {
  const now = new Date();
  const id = newId('operation', now.getTime());
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`operations:${input.projectId}`}, 0))`);
    // A statement of its own after the lock: it sees what the requests before it committed.
    const [running] = await queryRows<{ webhook_running: string | null; project_running: number }>(
      tx,
      sql`select (select id from operations where project_id = ${input.projectId} and webhook_id = ${input.webhookId} and status = 'running' limit 1) as webhook_running,
                 (select count(*)::int from operations where project_id = ${input.projectId} and status = 'running') as project_running`,
    );
    if (running!.webhook_running) return { running: running!.webhook_running };
    if (running!.project_running >= maxPerProject) return { projectLimit: maxPerProject };
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
        selectionComplete: false,
        createdAt: now,
      })
      .returning();
    return { ...operation!, matched: 0, retried: 0, skipped: 0 };
  });
}

/**
 * Selects the next `pageSize` deliveries the operation matches, after its cursor in id order,
 * into `operation_deliveries`, and moves the cursor on (marking the selection complete on a short
 * page). Each status is one range of `deliveries_webhook_status_idx`, bounded by the ids of the
 * filter's times, so a page reads what it selects. Safe to repeat: a delivery selected twice is
 * recorded once. Returns how many it selected.
 */
export async function selectOperationPage(db: Database, operation: OperationRow, pageSize: number): Promise<number> {
  const after = operation.selectionCursor ?? firstIdAt('delivery', operation.since?.getTime() ?? 0);
  const before = firstIdAt('delivery', operation.until.getTime() + 1);
  const ranges = operation.statuses.map(
    (status) => sql`(select id, created_at from deliveries
      where webhook_id = ${operation.webhookId} and status = ${status} and id > ${after} and id < ${before}
      order by id limit ${pageSize})`,
  );
  const [page] = await queryRows<{ selected: number; last: string | null }>(
    db,
    sql`with page as (
          select id from (${sql.join(ranges, sql` union all `)}) as candidate
          where created_at < ${operation.until.toISOString()}::timestamptz
            ${operation.since ? sql`and created_at >= ${operation.since.toISOString()}::timestamptz` : sql``}
          order by id limit ${pageSize}
        ), recorded as (
          insert into operation_deliveries (operation_id, delivery_id, state)
          select ${operation.id}, id, 'matched' from page
          on conflict do nothing
        ), moved as (
          update operations
          set selection_cursor = coalesce((select max(id) from page), selection_cursor),
              selection_complete = (select count(*) from page) < ${pageSize}
          where id = ${operation.id}
        )
        select (select count(*)::int from page) as selected, (select max(id) from page) as last`,
  );
  return page!.selected;
}

/** Running bulk retry operations of a project: they share its BULK_RETRY_RATE. */
export async function runningOperationsOf(db: Database, projectId: string): Promise<number> {
  const [row] = await queryRows<{ n: number }>(db, sql`select count(*)::int as n from operations where project_id = ${projectId} and status = 'running'`);
  return row!.n;
}

/**
 * Operations still `running` that were created before `before`, at most `limit`, in an order
 * drawn anew on each call: when more are running than `limit`, the long ones that are healthy
 * cannot keep another out of every call, as the oldest would if they always came first.
 */
export async function listRunningOperations(db: Database, before: Date, limit: number): Promise<OperationRow[]> {
  return db
    .select()
    .from(operations)
    .where(and(eq(operations.status, 'running'), lt(operations.createdAt, before)))
    .orderBy(sql`random()`)
    .limit(limit);
}

/** An operation of a webhook, with its counts. */
export async function findOperation(db: Database, webhookId: string, id: string): Promise<OperationView | undefined> {
  const [operation] = await db
    .select()
    .from(operations)
    .where(and(eq(operations.id, id), eq(operations.webhookId, webhookId)));
  if (!operation) return undefined;
  if (operation.matchedCount !== null) {
    return { ...operation, matched: operation.matchedCount, retried: operation.retriedCount ?? 0, skipped: operation.skippedCount ?? 0 };
  }
  const counts = await db
    .select({ state: operationDeliveries.state, n: sql<number>`count(*)::int` })
    .from(operationDeliveries)
    .where(eq(operationDeliveries.operationId, id))
    .groupBy(operationDeliveries.state);
  const count = (state: string) => counts.find((row) => row.state === state)?.n ?? 0;
  const matched = counts.reduce((sum, row) => sum + row.n, 0);
  return { ...operation, matched, retried: count('retried'), skipped: count('skipped') };
}

/**
 * The next `limit` deliveries of an operation in `state`, in id order, with their event: read
 * along `operation_deliveries_state_idx`, so only what it returns is read, however many
 * deliveries the operation has handled before.
 */
export function operationItemsIn(db: Database, operationId: string, state: 'matched' | 'queued', limit: number) {
  return db
    .select({ deliveryId: operationDeliveries.deliveryId, state: operationDeliveries.state, event: deliveries.event })
    .from(operationDeliveries)
    .innerJoin(deliveries, eq(deliveries.id, operationDeliveries.deliveryId))
    .where(and(eq(operationDeliveries.operationId, operationId), eq(operationDeliveries.state, state)))
    .orderBy(asc(operationDeliveries.deliveryId))
    .limit(limit);
}

/**
 * The statement of {@link pendingOperationItems}: {@link operationItemsIn} for each state, so a
 * step reads what it returns, however many deliveries the operation has handled before.
 */
export function pendingOperationItemsStatement(db: Database, operationId: string, limit: number): SQL {
  const inState = (state: 'matched' | 'queued') => operationItemsIn(db, operationId, state, limit).getSQL();
  return sql`select delivery_id, state, event from ((${inState('queued')}) union all (${inState('matched')})) as pending
             order by state = 'queued' desc, delivery_id limit ${limit}`;
}

/**
 * The next deliveries an operation has still to handle, with their state and event: those queued
 * but not yet signalled (an earlier attempt stopped in between) first, then those matched, in id
 * order.
 */
export async function pendingOperationItems(db: Database, operationId: string, limit: number) {
  const rows = await queryRows<{ delivery_id: string; state: 'matched' | 'queued'; event: string }>(db, pendingOperationItemsStatement(db, operationId, limit));
  return rows.map((row) => ({ deliveryId: row.delivery_id, state: row.state, event: row.event }));
}

/**
 * Moves a matched delivery back to `pending` for the operation's retry, if it is still in one of
 * `statuses`, and marks it `queued`; otherwise marks it `skipped`. Returns whether it was queued.
 * One statement, not a transaction of two: one round trip instead of four, and the embedded
 * database, which serves one session at a time, is not held for other callers in between.
 */
export async function queueOperationItem(db: Database, operationId: string, deliveryId: string, statuses: DeliveryStatus[]): Promise<boolean> {
  // Both updates run whether or not the main query reads them; the answer is the delivery's move,
  // so a delivery moved to `pending` is always signalled.
  const [row] = await queryRows<{ queued: boolean }>(
    db,
    sql`with moved as (
          update ${deliveries} set status = 'pending', next_retry_at = null, updated_at = ${new Date().toISOString()}::timestamptz
          where ${deliveries.id} = ${deliveryId} and ${inArray(deliveries.status, statuses)}
          returning 1
        ), marked as (
          update ${operationDeliveries} set state = case when exists (select 1 from moved) then 'queued' else 'skipped' end
          where ${operationDeliveries.operationId} = ${operationId} and ${operationDeliveries.deliveryId} = ${deliveryId}
            and ${operationDeliveries.state} = 'matched'
        )
        select exists (select 1 from moved) as queued`,
  );
  return row?.queued === true;
}

/** Marks a queued item retried once its delivery workflow has the signal. */
export async function markOperationItemRetried(db: Database, operationId: string, deliveryId: string): Promise<void> {
  await db
    .update(operationDeliveries)
    .set({ state: 'retried' })
    .where(and(eq(operationDeliveries.operationId, operationId), eq(operationDeliveries.deliveryId, deliveryId)));
}

/**
 * Ends a running operation with `status` (a finished one keeps its end), its counts kept on its
 * row; true when this call ended it.
 */
export async function finishOperation(db: Database, operationId: string, status: Exclude<OperationStatus, 'running'>): Promise<boolean> {
  const countOf = (state?: string) =>
    sql<number>`(select count(*)::int from ${operationDeliveries} where ${operationDeliveries.operationId} = ${operationId}${state ? sql` and ${operationDeliveries.state} = ${state}` : sql``})`;
  const ended = await db
    .update(operations)
    .set({ status, finishedAt: new Date(), matchedCount: countOf(), retriedCount: countOf('retried'), skippedCount: countOf('skipped') })
    .where(and(eq(operations.id, operationId), eq(operations.status, 'running'), isNull(operations.finishedAt)))
    .returning({ id: operations.id });
  return ended.length > 0;
}

/** An operation by id alone (for its workflow). */
export async function findOperationById(db: Database, id: string): Promise<OperationRow | undefined> {
  const [operation] = await db.select().from(operations).where(eq(operations.id, id));
  return operation;
}
