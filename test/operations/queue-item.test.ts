/**
 * Queueing one delivery of a bulk retry is one statement, not a transaction: one round trip for
 * each delivery an operation retries, and the embedded database (one session at a time) is not
 * held for other callers in between. Both outcomes are checked: a delivery still in the
 * operation's statuses is queued (and `pending`), one that moved on is skipped and untouched.
 */
import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase, pingDatabase, type DatabaseHandle } from '../../src/db/client.ts';
import { createRetryOperation, queueOperationItem, selectOperationPage } from '../../src/db/queries/operations.ts';
import { deliveries, operationDeliveries } from '../../src/db/schema.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { statementKeyword } from '../support/statement-counter.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';

let database: SharedTestDatabase;
let counted: DatabaseHandle;
const seen: string[] = [];

beforeAll(async () => {
  database = await openSharedTestDatabase();
  counted = await openDatabase({ kind: 'postgres', url: database.url, poolMax: 1 }, { onStatement: (text) => seen.push(text) });
});
afterAll(async () => {
  await counted?.close();
  await database?.close();
});

it('queues a delivery still dead-lettered and skips one that moved on, each in one statement outside any transaction', async () => {
  const db = database.db;
  const project = await storedProject(db, 'queue-item');
  const { webhookId, ids } = await webhookWithDeliveries(db, new SecretBox(generateEncryptionKey()), project, { url: 'https://127.0.0.1:1/hooks', count: 2 });
  const [stillDead, movedOn] = ids as [string, string];
  await db.update(deliveries).set({ status: 'dead_letter' }).where(inArray(deliveries.id, ids));
  const operation = await createRetryOperation(db, { projectId: project.projectId, webhookId, statuses: ['dead_letter'], until: new Date(Date.now() + 60_000) }, 10);
  if (!('id' in operation)) throw new Error(`no operation: ${JSON.stringify(operation)}`);
  expect(await selectOperationPage(db, operation, 10)).toBe(2);
  await db.update(deliveries).set({ status: 'delivered' }).where(eq(deliveries.id, movedOn));

  await pingDatabase(counted.db); // the connection's own opening is not the statement counted
  seen.length = 0;
  expect(await queueOperationItem(counted.db, operation.id, stillDead, ['dead_letter'])).toBe(true);
  expect(await queueOperationItem(counted.db, operation.id, movedOn, ['dead_letter'])).toBe(false);
  const keywords = seen.map(statementKeyword);
  expect(keywords).toEqual(['with', 'with']);

  const statuses = await db.select({ id: deliveries.id, status: deliveries.status }).from(deliveries).where(inArray(deliveries.id, ids));
  expect(Object.fromEntries(statuses.map((row) => [row.id, row.status]))).toEqual({ [stillDead]: 'pending', [movedOn]: 'delivered' });
  const items = await db.select({ deliveryId: operationDeliveries.deliveryId, state: operationDeliveries.state }).from(operationDeliveries).where(eq(operationDeliveries.operationId, operation.id));
  expect(Object.fromEntries(items.map((row) => [row.deliveryId, row.state]))).toEqual({ [stillDead]: 'queued', [movedOn]: 'skipped' });
});
