/**
 * A deliveries batch of the retention sweep reads what it deletes: with a period shorter than the
 * dead-letter wait, the dead letters it keeps are older than delivered rows it deletes, and a
 * batch walking both statuses in one range read every kept one, every batch.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { settledDeliveriesBatch, sweepCutoffs } from '../../src/retention/sweep.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { seedProject } from '../support/history.ts';
import { rowsReadFrom } from '../support/query-plans.ts';

const HOUR_MS = 3_600_000;
let database: SharedTestDatabase;

beforeAll(async () => {
  database = await openSharedTestDatabase();
}, 120_000);
afterAll(async () => {
  await database?.close();
});

it('a batch under a 1-day period reads the delivered rows it deletes, not the 3-day-old dead letters it keeps', async () => {
  const db = database.db;
  const { projectId, webhookIds } = await seedProject(db, new SecretBox(generateEncryptionKey()), 1);
  const seed = async (prefix: string, count: number, status: string, hoursAgo: number) => {
    await db.execute(sql`
      insert into events (id, project_id, producer_event_id, event, occurred_at, created_at)
      select 'evt_' || ${prefix} || n, ${projectId}, ${prefix} || n, 'docauth.completed', now(), now() - make_interval(hours => ${hoursAgo})
      from generate_series(1, ${count}) as n`);
    await db.execute(sql`
      insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
      select 'dlv_' || ${prefix} || n, ${webhookIds[0]}, 'evt_' || ${prefix} || n, 'docauth.completed', ${status}, 1,
             now() - make_interval(hours => ${hoursAgo}), now() - make_interval(hours => ${hoursAgo}, secs => n)
      from generate_series(1, ${count}) as n`);
  };
  const kept = 5_000;
  await seed('kept_dead_', kept, 'dead_letter', 72);
  await seed('old_delivered_', 20, 'delivered', 48);
  await db.execute(sql`analyze deliveries`);

  const batchSize = 10;
  const [explained] = await queryRows<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
    db,
    sql`explain (analyze, format json) ${settledDeliveriesBatch(sweepCutoffs(new Date(), 24 * HOUR_MS), batchSize)}`,
  );
  const remaining = await queryRows<{ status: string; n: number }>(db, sql`select status, count(*)::int as n from deliveries group by status order by status`);
  expect(remaining).toEqual([
    { status: 'dead_letter', n: kept },
    { status: 'delivered', n: 20 - batchSize },
  ]);
  // The rows the batch deleted, each found, looked up by id and deleted: nothing else.
  expect(rowsReadFrom(explained!['QUERY PLAN'][0].Plan, 'deliveries')).toBeLessThanOrEqual(3 * batchSize);
});
