import { eq, sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { deliveries, events, operations } from '../../src/db/schema.ts';
import { publishTestEvent } from '../../src/events/publish.ts';
import { BASE, createWebhookFor } from '../delivery/support.ts';
import { databaseKind } from '../support/database.ts';
import { docauthData, startHarness, type Harness } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';

/*
 * A webhook deleted or disabled while a request that uses it runs: the request gets an answer
 * that says so, never a 500, and nothing half-made is stored.
 */

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.stop();
});

const RECEIVER = 'https://127.0.0.1:9/hook';

/**
 * Deletes `webhookId` in a transaction of another connection, runs `request` while that delete is
 * not yet committed (the request's statement then waits on the row's lock: MVCC still shows it the
 * webhook), commits once the request waits, and answers what the request answered.
 */
async function deleteWhile<T>(webhookId: string, request: () => Promise<T>): Promise<T> {
  const target = h.databaseTarget;
  if (target.kind !== 'postgres') throw new Error('needs PostgreSQL');
  const other = postgres(target.url, { max: 1, onnotice: () => {} });
  try {
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let held!: () => void;
    const holding = new Promise<void>((resolve) => (held = resolve));
    const deleting = other.begin(async (tx) => {
      await tx`delete from webhooks where id = ${webhookId}`;
      held();
      await committed;
    });
    // The delete holds the row before the request starts.
    await Promise.race([holding, deleting]);
    const answer = request();
    // Counted in this file's own database: other files' lock waits run on the same server.
    await waitFor('the request to wait on the deleted row', async () => {
      const [row] = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`);
      return row!.n > 0;
    });
    commit();
    await deleting;
    return await answer;
  } finally {
    await other.end();
  }
}

describe.skipIf(databaseKind !== 'postgres')('a webhook deleted while a request uses it (PostgreSQL)', () => {
  it('publishes to the webhooks left: the event is accepted, with no delivery for the deleted one', async () => {
    const { key, webhookId: deletedId } = await createWebhookFor(h, RECEIVER);
    // A second webhook of the same project, that stays.
    const kept = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      body: { api_key_id: key.id, url: `${RECEIVER}/kept`, events: ['docauth.completed'] },
    });
    const keptId: string = kept.body.data.id;

    const answer = await deleteWhile(deletedId, () =>
      h.publish({ project_id: key.projectId, id: 'race-1', event: 'docauth.completed', data: docauthData() }),
    );
    expect(answer.status).toBe(202);
    const stored = await h.db.select({ id: deliveries.id, webhookId: deliveries.webhookId }).from(deliveries).where(eq(deliveries.eventId, answer.body.data.event_id));
    expect(stored.map((row) => row.webhookId)).toEqual([keptId]);
    expect(answer.body.data.delivery_ids).toEqual(stored.map((row) => row.id));
  });

  it('answers a bulk retry 409 conflict, and stores no operation', async () => {
    const { key, webhookId } = await createWebhookFor(h, RECEIVER);
    const answer = await deleteWhile(webhookId, () =>
      h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token, body: { status: ['dead_letter'] } }),
    );
    expect(answer.status).toBe(409);
    expect(answer.body.error).toEqual({ code: 'conflict', message: 'something this request refers to was deleted while it ran; nothing was stored' });
    expect(await h.db.select().from(operations).where(eq(operations.webhookId, webhookId))).toEqual([]);
  });
});

describe('a test event for a webhook no longer active', () => {
  it('stores nothing when the webhook was disabled after the route looked', async () => {
    const { key, webhookId } = await createWebhookFor(h, RECEIVER);
    const disabled = await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { status: 'disabled' } });
    expect(disabled.status).toBe(200);
    // The route saw the webhook active an instant before: the publish itself finds it disabled.
    const published = await publishTestEvent({ db: h.db, scheduler: h.scheduler, secretBox: h.secretBox }, key.projectId, webhookId);
    expect(published).toBeUndefined();
    expect(await h.db.select().from(events).where(eq(events.projectId, key.projectId))).toEqual([]);
  });
});

describe('an event published again as the retention sweep deletes the first', () => {
  it('is published anew, not answered 500', async () => {
    const { key } = await createWebhookFor(h, RECEIVER);
    const body = { project_id: key.projectId, id: 'published-twice', event: 'docauth.completed', data: docauthData() };
    const first = await h.publish(body);
    expect(first.status).toBe(202);
    // Once: the second publish's insert meets the first event (and so inserts nothing), which is
    // deleted before the read that follows, as a sweep between the two statements would.
    await h.db.execute(sql`create table sweep_once (armed boolean)`);
    await h.db.execute(sql`insert into sweep_once values (true)`);
    await h.db.execute(sql`create function sweep_between() returns trigger language plpgsql as $$
      begin
        delete from sweep_once;
        if found then
          delete from deliveries where event_id in (select id from events where project_id = new.project_id and producer_event_id = new.producer_event_id);
          delete from events where project_id = new.project_id and producer_event_id = new.producer_event_id;
          return null;
        end if;
        return new;
      end $$`);
    await h.db.execute(sql`create trigger sweep_between before insert on events for each row execute function sweep_between()`);
    try {
      const again = await h.publish(body);
      expect(again.status).toBe(202);
      expect(again.body.data.event_id).not.toBe(first.body.data.event_id);
      const stored = await h.db.select({ id: events.id }).from(events).where(eq(events.projectId, key.projectId));
      expect(stored).toEqual([{ id: again.body.data.event_id }]);
    } finally {
      await h.db.execute(sql`drop trigger sweep_between on events`);
      await h.db.execute(sql`drop function sweep_between()`);
      await h.db.execute(sql`drop table sweep_once`);
    }
  });
});
