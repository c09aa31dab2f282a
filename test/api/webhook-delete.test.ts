import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { BASE, createWebhookFor } from '../delivery/support.ts';
import { databaseKind } from '../support/database.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/*
 * Deleting a webhook with a long history: its deliveries and attempts go in statements that each
 * stay within DATABASE_STATEMENT_TIMEOUT, however many there are.
 */

const HISTORY = 100_000;
let h: Harness;

beforeAll(async () => {
  if (databaseKind !== 'postgres') return;
  // A statement timeout one cascade over the whole history would not fit in.
  h = await startHarness({ database: { timeouts: { statementMs: 1_000, lockMs: 1_000 } } });
}, 120_000);
afterAll(async () => {
  await h?.stop();
});

describe.skipIf(databaseKind !== 'postgres')('deleting a webhook with a long history (PostgreSQL)', () => {
  it(`deletes ${HISTORY.toLocaleString('en')} deliveries and their attempts within a 1 s statement timeout, answering 204`, async () => {
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:9/hook');
    const target = h.databaseTarget;
    if (target.kind !== 'postgres') throw new Error('needs PostgreSQL');
    // Seeded over a connection of its own, without the harness's timeout; a tenth not yet delivered.
    const seeding = postgres(target.url, { max: 1, onnotice: () => {} });
    try {
      const id = (kind: string) => seeding.unsafe(`'${kind}_old_' || lpad(n::text, 7, '0')`);
      await seeding`insert into events (id, project_id, producer_event_id, event, occurred_at, created_at, dispatched_at)
        select ${id('evt')}, ${key.projectId}, ${id('seed')}, 'docauth.completed', now(), now(), now() from generate_series(1, ${HISTORY}::int) as n`;
      await seeding`insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
        select ${id('dlv')}, ${webhookId}, ${id('evt')}, 'docauth.completed', case when n % 10 = 0 then 'dead_letter' else 'delivered' end, 1, now(), now()
        from generate_series(1, ${HISTORY}::int) as n`;
      await seeding`insert into delivery_attempts (id, delivery_id, attempt_number, outcome, started_at)
        select ${id('att')}, ${id('dlv')}, 1, 'succeeded', now() from generate_series(1, ${HISTORY}::int) as n`;
      await seeding`analyze`;
    } finally {
      await seeding.end();
    }

    const deleted = await h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token });
    expect(deleted.status).toBe(204);
    const [left] = await queryRows<{ deliveries: number; attempts: number }>(
      h.db,
      sql`select (select count(*)::int from deliveries where id like 'dlv_old_%') as deliveries, (select count(*)::int from delivery_attempts where id like 'att_old_%') as attempts`,
    );
    expect(left).toEqual({ deliveries: 0, attempts: 0 });
    expect((await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token })).status).toBe(404);
  }, 300_000);
});
