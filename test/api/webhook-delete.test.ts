import { eq, sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { sendPlaces } from '../../src/db/schema.ts';
import { deleteWebhook, WEBHOOK_DELETE_BATCH } from '../../src/db/queries/webhooks.ts';
import { BASE, createWebhookFor, publishFor } from '../delivery/support.ts';
import { databaseKind } from '../support/database.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';

/*
 * Deleting a webhook with a long history: its deliveries and attempts go in statements that each
 * stay within DATABASE_STATEMENT_TIMEOUT, however many there are. Whatever a delete deleted has its
 * workflows cancelled, even when it fails part way or another delete of the webhook ends first.
 * The harness runs no worker: the delivery workflows stay open, and a cancellation is seen as the
 * request in their histories.
 */

const HISTORY = 100_000;
let h: Harness;

beforeAll(async () => {
  // A statement timeout one cascade over the whole history would not fit in.
  h = await startHarness({ database: { timeouts: { statementMs: 1_000, lockMs: 1_000 } } });
}, 120_000);
afterAll(async () => {
  await h?.stop();
});

/** Whether the workflow of `deliveryId` was asked to cancel. */
async function cancelRequested(deliveryId: string): Promise<boolean> {
  const history = await h.client.workflow.getHandle(deliveryId).fetchHistory();
  return (history.events ?? []).some((event) => event.workflowExecutionCancelRequestedEventAttributes);
}

describe('deleting a webhook while something else changes it', () => {
  it('hands over the deliveries it deleted when another delete of the webhook ends first', async () => {
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:9/hook');
    const published = [(await publishFor(h, key.projectId)).delivery_ids[0]!, (await publishFor(h, key.projectId)).delivery_ids[0]!];
    const handed: string[] = [];
    let otherDeleteEnded = false;
    const deleted = await deleteWebhook(h.db, webhookId, async (notDelivered) => {
      handed.push(...notDelivered);
      if (otherDeleteEnded) return;
      // The other delete's last transaction commits between this one's statements.
      await h.db.execute(sql`delete from webhooks where id = ${webhookId}`);
      otherDeleteEnded = true;
    });
    expect(deleted).toBe(false);
    expect(handed.sort()).toEqual([...published].sort());
  });
});

describe.skipIf(databaseKind !== 'postgres')('deleting a webhook (PostgreSQL)', () => {
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

  it('cancels the workflows of the deliveries it deleted when its last transaction fails, and goes on when asked again', async () => {
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:9/hook');
    const deliveryId = (await publishFor(h, key.projectId)).delivery_ids[0]!;
    const target = h.databaseTarget;
    if (target.kind !== 'postgres') throw new Error('needs PostgreSQL');
    // Another session holds the webhook's row: the delete's last transaction gives up after the 1 s lock timeout.
    const holder = postgres(target.url, { max: 1, onnotice: () => {} });
    try {
      const failed = await holder.begin(async (tx) => {
        await tx`select id from webhooks where id = ${webhookId} for update`;
        return h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token });
      });
      expect(failed.status).toBe(500);
      expect(failed.body.error.code).toBe('internal_error');
    } finally {
      await holder.end();
    }
    expect(await cancelRequested(deliveryId)).toBe(true);
    expect((await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token })).status).toBe(200);
    expect((await h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token })).status).toBe(204);
    expect((await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token })).status).toBe(404);
  });

  it('takes its send places before its row, as a request for places does: the two wait for each other in turn, never both', async () => {
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:9/hook');
    await h.db.insert(sendPlaces).values({ scope: `w:${webhookId}`, slot: 0 });
    const target = h.databaseTarget;
    if (target.kind !== 'postgres') throw new Error('needs PostgreSQL');
    const other = postgres(target.url, { max: 1, onnotice: () => {} });
    try {
      const { deleting } = await other.begin(async (tx) => {
        // A request for places: the webhook's free place first...
        await tx`select slot from send_places where scope = ${`w:${webhookId}`} for update`;
        const deleting = h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token });
        // Asked outside this transaction, which would see one snapshot of the sessions.
        const waiting = async () =>
          (await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%send_places%'`))[0]!.n > 0;
        while (!(await waiting())) await new Promise((resolve) => setTimeout(resolve, 10));
        // ...then its row, which the delete has not taken (before, it had: a deadlock, one of the two failed).
        await tx`select id from webhooks where id = ${webhookId} for update`;
        return { deleting };
      });
      expect((await deleting).status).toBe(204);
    } finally {
      await other.end();
    }
    expect((await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token })).status).toBe(404);
    expect(await h.db.$count(sendPlaces, eq(sendPlaces.scope, `w:${webhookId}`))).toBe(0);
  });

  it('goes on in batches after one that another delete emptied as it waited', async () => {
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:9/hook');
    const target = h.databaseTarget;
    if (target.kind !== 'postgres') throw new Error('needs PostgreSQL');
    const seeded = 2 * WEBHOOK_DELETE_BATCH + 500;
    const other = postgres(target.url, { max: 1, onnotice: () => {} });
    try {
      const id = (kind: string) => other.unsafe(`'${kind}_race_' || lpad(n::text, 7, '0')`);
      await other`insert into events (id, project_id, producer_event_id, event, occurred_at, created_at, dispatched_at)
        select ${id('evt')}, ${key.projectId}, ${id('seed')}, 'docauth.completed', now(), now(), now() from generate_series(1, ${seeded}::int) as n`;
      await other`insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
        select ${id('dlv')}, ${webhookId}, ${id('evt')}, 'docauth.completed', 'dead_letter', 5, now(), now() from generate_series(1, ${seeded}::int) as n`;

      const handed: number[] = [];
      let deleting: Promise<boolean> | undefined;
      await other.begin(async (tx) => {
        // Another delete's first batch, not yet committed: this one's first batch chooses the same rows and waits for them.
        await tx`delete from deliveries where id in (select id from deliveries where webhook_id = ${webhookId} order by id limit ${WEBHOOK_DELETE_BATCH})`;
        deleting = deleteWebhook(h.db, webhookId, (notDelivered) => void handed.push(notDelivered.length));
        await waitFor('the delete to wait for the rows the other chose', async () => {
          const [row] = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like 'delete from deliveries%'`);
          return row!.n > 0;
        }, { intervalMs: 10, timeoutMs: 5_000 }); // within the delete's 1 s lock timeout
      });
      expect(await deleting).toBe(true);
      // Before, the emptied batch ended the batches, and the rest went in the last transaction's one statement.
      expect(Math.max(...handed)).toBeLessThanOrEqual(WEBHOOK_DELETE_BATCH);
      expect(handed.reduce((sum, n) => sum + n, 0)).toBe(seeded - WEBHOOK_DELETE_BATCH);
    } finally {
      await other.end();
    }
  });
});
