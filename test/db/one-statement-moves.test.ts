/**
 * The moves of a delivery that run often or on every dead letter are each one statement, not a
 * transaction: one round trip instead of four, and the embedded database (one session at a time)
 * is not held for other callers in between. Each test counts the statements on the wire and checks
 * the rows every outcome leaves:
 * - a bulk retry queues a delivery still in its statuses and skips one that moved on;
 * - a dead letter closes the attempts left open and leaves a delivered delivery alone;
 * - a manual retry moves a retryable delivery to `pending` and says what it replaced.
 */
import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase, pingDatabase, type DatabaseHandle } from '../../src/db/client.ts';
import { markDeadLetter, queueManualRetry } from '../../src/db/queries/deliveries.ts';
import { createRetryOperation, queueOperationItem, selectOperationPage } from '../../src/db/queries/operations.ts';
import { deliveries, deliveryAttempts, operationDeliveries } from '../../src/db/schema.ts';
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

/** `count` deliveries of a new project's webhook, each in `status`. */
async function deliveriesIn(projectId: string, status: 'dead_letter' | 'failed', count: number) {
  const db = database.db;
  const project = await storedProject(db, projectId);
  const stored = await webhookWithDeliveries(db, new SecretBox(generateEncryptionKey()), project, { url: 'https://127.0.0.1:1/hooks', count });
  await db.update(deliveries).set({ status }).where(inArray(deliveries.id, stored.ids));
  return { project, ...stored };
}

/** The keywords of the statements `run` sent through the counted connection. */
async function keywordsOf(run: () => Promise<void>): Promise<(string | undefined)[]> {
  await pingDatabase(counted.db); // the connection's own opening is not a statement counted
  seen.length = 0;
  await run();
  return seen.map(statementKeyword);
}

async function statusesOf(ids: string[]) {
  const rows = await database.db.select({ id: deliveries.id, status: deliveries.status }).from(deliveries).where(inArray(deliveries.id, ids));
  return Object.fromEntries(rows.map((row) => [row.id, row.status]));
}

it('queues a delivery still dead-lettered and skips one that moved on, each in one statement outside any transaction', async () => {
  const db = database.db;
  const { project, webhookId, ids } = await deliveriesIn('queue-item', 'dead_letter', 2);
  const [stillDead, movedOn] = ids as [string, string];
  const operation = await createRetryOperation(db, { projectId: project.projectId, webhookId, statuses: ['dead_letter'], until: new Date(Date.now() + 60_000) }, 10);
  if (!('id' in operation)) throw new Error(`no operation: ${JSON.stringify(operation)}`);
  expect(await selectOperationPage(db, operation, 10)).toBe(2);
  await db.update(deliveries).set({ status: 'delivered' }).where(eq(deliveries.id, movedOn));

  const answers: boolean[] = [];
  const keywords = await keywordsOf(async () => {
    answers.push(await queueOperationItem(counted.db, operation.id, stillDead, ['dead_letter']));
    answers.push(await queueOperationItem(counted.db, operation.id, movedOn, ['dead_letter']));
  });
  expect(answers).toEqual([true, false]);
  expect(keywords).toEqual(['with', 'with']);

  expect(await statusesOf(ids)).toEqual({ [stillDead]: 'pending', [movedOn]: 'delivered' });
  const items = await db.select({ deliveryId: operationDeliveries.deliveryId, state: operationDeliveries.state }).from(operationDeliveries).where(eq(operationDeliveries.operationId, operation.id));
  expect(Object.fromEntries(items.map((row) => [row.deliveryId, row.state]))).toEqual({ [stillDead]: 'queued', [movedOn]: 'skipped' });
});

it('dead-letters a delivery and closes the attempt it left open in one statement, and leaves a delivered delivery alone', async () => {
  const db = database.db;
  const { ids } = await deliveriesIn('dead-letter-move', 'failed', 2);
  const [abandoned, delivered] = ids as [string, string];
  await db.update(deliveries).set({ status: 'processing', lastError: 'HTTP 500' }).where(eq(deliveries.id, abandoned));
  await db.update(deliveries).set({ status: 'delivered' }).where(eq(deliveries.id, delivered));
  await db.insert(deliveryAttempts).values([
    { id: `${abandoned}-1`, deliveryId: abandoned, attemptNumber: 1, startedAt: new Date(), statusCode: 500, outcome: 'http_error' },
    { id: `${abandoned}-2`, deliveryId: abandoned, attemptNumber: 2, startedAt: new Date(), outcome: 'in_progress' },
  ]);

  const keywords = await keywordsOf(async () => {
    await markDeadLetter(counted.db, abandoned, 'the attempt did not report back in time');
    await markDeadLetter(counted.db, delivered);
  });
  expect(keywords).toEqual(['with', 'with']);

  expect(await statusesOf(ids)).toEqual({ [abandoned]: 'dead_letter', [delivered]: 'delivered' });
  const [row] = await db.select({ lastError: deliveries.lastError, nextRetryAt: deliveries.nextRetryAt }).from(deliveries).where(eq(deliveries.id, abandoned));
  expect(row).toEqual({ lastError: 'the attempt did not report back in time', nextRetryAt: null });
  const attempts = await db.select({ attemptNumber: deliveryAttempts.attemptNumber, outcome: deliveryAttempts.outcome }).from(deliveryAttempts).where(eq(deliveryAttempts.deliveryId, abandoned)).orderBy(deliveryAttempts.attemptNumber);
  expect(attempts).toEqual([{ attemptNumber: 1, outcome: 'http_error' }, { attemptNumber: 2, outcome: 'timeout' }]);
});

it('queues a manual retry in one statement and returns what it replaced; a delivery in no retryable status is left as it is', async () => {
  const db = database.db;
  const { ids } = await deliveriesIn('manual-retry-move', 'failed', 2);
  const [failed, delivered] = ids as [string, string];
  const nextRetryAt = new Date(Date.now() + 60_000);
  await db.update(deliveries).set({ nextRetryAt }).where(eq(deliveries.id, failed));
  await db.update(deliveries).set({ status: 'delivered' }).where(eq(deliveries.id, delivered));

  const replaced: unknown[] = [];
  const keywords = await keywordsOf(async () => {
    replaced.push(await queueManualRetry(counted.db, failed));
    replaced.push(await queueManualRetry(counted.db, delivered));
  });
  expect(keywords).toEqual(['update', 'update']);
  expect(replaced).toEqual([{ status: 'failed', nextRetryAt }, undefined]);

  expect(await statusesOf(ids)).toEqual({ [failed]: 'pending', [delivered]: 'delivered' });
  const [row] = await db.select({ nextRetryAt: deliveries.nextRetryAt }).from(deliveries).where(eq(deliveries.id, failed));
  expect(row?.nextRetryAt).toBeNull();
});
