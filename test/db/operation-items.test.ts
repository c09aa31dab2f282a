/**
 * The items of a bulk retry operation: a step reads only the deliveries it handles, however many
 * the operation handled before, and a step run twice at once (its first attempt past its
 * heartbeat, still running) leaves each delivery's state and the operation's counts exact.
 */
import { inArray, sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import {
  createRetryOperation,
  findOperation,
  finishOperation,
  markOperationItemRetried,
  pendingOperationItems,
  pendingOperationItemsStatement,
  queueOperationItem,
  selectOperationPage,
} from '../../src/db/queries/operations.ts';
import { deliveries } from '../../src/db/schema.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { rowsReadFrom } from '../support/query-plans.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';

let database: SharedTestDatabase;

beforeAll(async () => {
  database = await openSharedTestDatabase();
});
afterAll(async () => {
  await database?.close();
});

/** A running operation over `count` dead-lettered deliveries of a new project's webhook, its first page selected. */
async function operationOver(projectId: string, count: number) {
  const db = database.db;
  const project = await storedProject(db, projectId);
  const { webhookId, ids } = await webhookWithDeliveries(db, new SecretBox(generateEncryptionKey()), project, { url: 'https://127.0.0.1:1/hooks', count });
  await db.update(deliveries).set({ status: 'dead_letter' }).where(inArray(deliveries.id, ids));
  const operation = await createRetryOperation(db, { projectId, webhookId, statuses: ['dead_letter'], until: new Date(Date.now() + 60_000) }, 10);
  if (!('id' in operation)) throw new Error(`no operation: ${JSON.stringify(operation)}`);
  expect(await selectOperationPage(db, operation, 100)).toBe(count);
  return { operation, webhookId, ids };
}

it('a step reads the deliveries it handles, not those the operation handled before', async () => {
  const db = database.db;
  const { operation } = await operationOver('items-read', 10);
  // 20,000 deliveries the operation has retried already, as after a long run.
  const handled = 20_000;
  await db.execute(sql`
    insert into events (id, project_id, producer_event_id, event, occurred_at, created_at)
    select 'evt_handled_' || n, ${operation.projectId}, 'handled-' || n, 'docauth.completed', now(), now() from generate_series(1, ${handled}) as n`);
  await db.execute(sql`
    insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
    select 'dlv_handled_' || n, ${operation.webhookId}, 'evt_handled_' || n, 'docauth.completed', 'pending', 5, now(), now() from generate_series(1, ${handled}) as n`);
  await db.execute(sql`
    insert into operation_deliveries (operation_id, delivery_id, state)
    select ${operation.id}, 'dlv_handled_' || n, 'retried' from generate_series(1, ${handled}) as n`);
  await db.execute(sql`analyze operation_deliveries`);

  const limit = 5;
  expect((await pendingOperationItems(db, operation.id, limit)).map((item) => item.state)).toEqual(Array(limit).fill('matched'));
  const [explained] = await queryRows<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
    db,
    sql`explain (analyze, format json) ${pendingOperationItemsStatement(db, operation.id, limit)}`,
  );
  const read = rowsReadFrom(explained!['QUERY PLAN'][0].Plan, 'operation_deliveries');
  expect(read).toBeLessThanOrEqual(2 * limit);
});

it('a step run twice at once, the second on a stale read, leaves a retried delivery retried', async () => {
  const db = database.db;
  const { operation, ids } = await operationOver('items-twice', 1);
  const [deliveryId] = ids as [string];
  // Both runs of the step read the delivery as matched; the first queues it and signals it.
  expect(await queueOperationItem(db, operation.id, deliveryId, ['dead_letter'])).toBe(true);
  await markOperationItemRetried(db, operation.id, deliveryId);
  // The second, on its stale read, finds the delivery moved on: it neither queues it nor marks it skipped.
  expect(await queueOperationItem(db, operation.id, deliveryId, ['dead_letter'])).toBe(false);
  expect(await finishOperation(db, operation.id, 'completed')).toBe(true);
  expect(await findOperation(db, operation.webhookId, operation.id)).toMatchObject({ matched: 1, retried: 1, skipped: 0 });
});
