import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { recordEvent } from '../../src/db/queries/events.ts';
import { CROCKFORD_DIGITS } from '../../src/ids.ts';
import { setProjectLimits } from '../../src/db/queries/limits.ts';
import { createRetryOperation, selectOperationPage, type OperationView } from '../../src/db/queries/operations.ts';
import { events, operationDeliveries, operations } from '../../src/db/schema.ts';
import { BASE, createWebhookFor, waitForDelivery } from '../delivery/support.ts';
import { docauthData, startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { storedDeliveries } from '../support/stored-deliveries.ts';
import { PortalVisitor } from '../portal/support.ts';

/*
 * What one project may put into the service: its publish quota at the producers' door (test
 * events included), its webhooks, and lists and fan-outs that stay bounded.
 */

// Slow enough that the refusal still stands after the pause the service takes before its 429.
const QUOTA = { rate: 0.25, burst: 3 };
const MAX_WEBHOOKS = 3;
let h: Harness;
let receiver: HttpsReceiver;

beforeAll(async () => {
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, delivery: { caFile: receiver.certFile }, admission: { publish: QUOTA, maxWebhooks: MAX_WEBHOOKS } });
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

const event = (projectId: string, id: string) => ({ project_id: projectId, id, event: 'docauth.completed', data: docauthData() });
const storedEvents = async (projectId: string) => (await h.db.select({ id: events.producerEventId }).from(events).where(eq(events.projectId, projectId))).map((row) => row.id).sort();

describe('the publish quota of a project', () => {
  it('accepts a burst, then answers 429 rate_limited with Retry-After and stores nothing of the refused event; what it accepted is delivered', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const answers = [];
    for (let i = 0; i < QUOTA.burst + 1; i += 1) answers.push(await h.publish(event(key.projectId, `burst-${i}`)));
    expect(answers.map((answer) => answer.status)).toEqual([202, 202, 202, 429]);
    const refused = answers[QUOTA.burst]!;
    expect(refused.body).toEqual({
      error: { code: 'rate_limited', message: expect.stringContaining(`project ${key.projectId} is publishing faster than its quota allows; nothing was stored`) },
      meta: { request_id: expect.any(String) },
    });
    const retryAfter = Number(refused.headers.get('Retry-After'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(await storedEvents(key.projectId)).toEqual(['burst-0', 'burst-1', 'burst-2']);

    // Another project is not held back by this one's quota.
    const other = await createWebhookFor(h, receiver.url);
    expect((await h.publish(event(other.key.projectId, 'other-0'))).status).toBe(202);
    // Its test events count too.
    const test = await h.request('POST', `${BASE}/webhooks/${webhookId}/test-events`, { token: key.token });
    expect(test.status).toBe(429);
    expect(test.body.error.code).toBe('rate_limited');

    // Once its time has come, the refused event is accepted; every accepted one is delivered.
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    const again = await h.publish(event(key.projectId, 'burst-3'));
    expect(again.status).toBe(202);
    for (const answer of [...answers.slice(0, QUOTA.burst), again]) {
      await waitForDelivery(h, key.token, webhookId, answer.body.data.delivery_ids[0], (d) => d.status === 'delivered');
    }
  }, 60_000);

  it("applies the operator's quota of a project over the configured one", async () => {
    const { key } = await createWebhookFor(h, receiver.url);
    await setProjectLimits(h.db, key.projectId, { publishRate: 1000, publishBurst: 20 });
    const answers = [];
    for (let i = 0; i < 10; i += 1) answers.push((await h.publish(event(key.projectId, `big-${i}`))).status);
    expect(answers).toEqual(Array(10).fill(202));
  });

  it('applies a quota the operator raises from the next requests, though the project had used up a slower one', async () => {
    const { key } = await createWebhookFor(h, receiver.url);
    await setProjectLimits(h.db, key.projectId, { publishRate: 0.01, publishBurst: 1 });
    expect((await h.publish(event(key.projectId, 'slow-0'))).status).toBe(202);
    const refused = await h.publish(event(key.projectId, 'slow-1'));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('Retry-After'))).toBeGreaterThan(90);

    await setProjectLimits(h.db, key.projectId, { publishRate: 1000, publishBurst: 20 });
    // Refused at most twice more: while this process remembers the refusal (a second at most),
    // and once as the new quota's used-up burst (for one step of its rate: a millisecond).
    const statuses = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await h.publish(event(key.projectId, `fast-${i}`))).status);
    expect(statuses.slice(2)).toEqual([202, 202, 202, 202]);
    expect(await storedEvents(key.projectId)).toEqual(['slow-0', ...statuses.flatMap((status, i) => (status === 202 ? [`fast-${i}`] : []))].sort());
  }, 30_000);
});

describe('the publish quota, through the portal', () => {
  it("answers a test event over the quota with the API's 429 and its Retry-After", async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const visitor = new PortalVisitor(h);
    await visitor.signIn(key.token);
    const statuses: number[] = [];
    let refused;
    for (let i = 0; i < QUOTA.burst + 1; i += 1) {
      const page = await visitor.post(`/portal/webhooks/${webhookId}/test-events`);
      statuses.push(page.status);
      refused = page;
    }
    expect(statuses).toEqual([303, 303, 303, 429]);
    expect(Number(refused!.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
    expect(refused!.html).toContain('is publishing faster than its quota allows');
  });
});

describe('webhooks of a project', () => {
  it('creates at most PROJECT_MAX_WEBHOOKS (or the operator\'s limit), answering 409 conflict past it', async () => {
    const key = await h.createKey();
    const create = (i: number) =>
      h.request('POST', `${BASE}/webhooks`, { token: key.token, body: { api_key_id: key.id, url: `${receiver.url}/cap/${i}`, events: ['docauth.completed'] } });
    const created = await Promise.all(Array.from({ length: MAX_WEBHOOKS + 2 }, (_, i) => create(i)));
    expect(created.map((answer) => answer.status).sort()).toEqual([...Array(MAX_WEBHOOKS).fill(201), 409, 409]);
    expect(created.find((answer) => answer.status === 409)!.body.error).toEqual({
      code: 'conflict',
      message: `project ${key.projectId} has ${MAX_WEBHOOKS} webhooks, its limit: delete one before creating another`,
    });
    await setProjectLimits(h.db, key.projectId, { maxWebhooks: MAX_WEBHOOKS + 1 });
    expect((await create(99)).status).toBe(201);
  });

  it('lists them a page at a time, oldest first, with a cursor', async () => {
    const key = await h.createKey();
    await setProjectLimits(h.db, key.projectId, { maxWebhooks: 10 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const created = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: { api_key_id: key.id, url: `${receiver.url}/list/${i}`, events: ['docauth.completed'] } });
      ids.push(created.body.data.id);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 3; page += 1) {
      const listed = await h.request('GET', `${BASE}/webhooks?limit=2${cursor ? `&starting_after=${cursor}` : ''}`, { token: key.token });
      expect(listed.status).toBe(200);
      seen.push(...listed.body.data.map((webhook: { id: string }) => webhook.id));
      expect(listed.body.meta.has_more).toBe(page < 2);
      cursor = listed.body.meta.next_cursor;
    }
    expect(seen).toEqual(ids);
    const all = await h.request('GET', `${BASE}/webhooks`, { token: key.token });
    expect(all.body.data.map((webhook: { id: string }) => webhook.id)).toEqual(ids);
    expect(all.body.meta).toEqual({ request_id: expect.any(String), has_more: false });
    const bad = await h.request('GET', `${BASE}/webhooks?limit=101`, { token: key.token });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
  });

  it('fans an event out to any number of subscribed webhooks in one statement (40,000: past the 65,535 parameters a row each would take)', async () => {
    const key = await h.createKey();
    // Seeded in one statement (the sealed secret is never opened: nothing is sent).
    await h.db.execute(sql`insert into webhooks (id, project_id, api_key_id, url, events, status, secret_sealed, created_at, updated_at)
      select 'wh_' || lpad(n::text, 26, '0'), ${key.projectId}, ${key.id}, 'https://fanout.example/' || n, array['docauth.completed'], 'active', 'unused', now(), now()
      from generate_series(1, 40000) as n`);
    const recorded = await recordEvent(h.db, h.secretBox, { projectId: key.projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData() });
    expect(recorded.deliveries).toHaveLength(40_000);
    // The database names them, in newId's layout: the event's time part, then 16 random digits.
    const ids = recorded.deliveries.map((delivery) => delivery.deliveryId);
    const timePart = recorded.event.id.slice('evt_'.length, 'evt_'.length + 10);
    for (const id of ids) expect(id).toMatch(new RegExp(`^dlv_${timePart}[${CROCKFORD_DIGITS}]{16}$`));
    expect(new Set(ids).size).toBe(ids.length);
    // Each of the 32 digits about equally often in the random parts (640,000 digits: 20,000 each).
    const digits = new Map<string, number>();
    for (const id of ids) for (const digit of id.slice(-16)) digits.set(digit, (digits.get(digit) ?? 0) + 1);
    expect(digits.size).toBe(32);
    for (const times of digits.values()) expect(Math.abs(times - 20_000)).toBeLessThan(1_000);
    const [count] = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from deliveries where event_id = ${recorded.event.id}`);
    expect(count!.n).toBe(40_000);
  }, 120_000);
});

describe('the selection of a bulk retry', () => {
  it('selects the matching deliveries in pages, in id order, within its times, and says when it is complete', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const before = new Date();
    const ids = await storedDeliveries(h.db, h.secretBox, key.projectId, webhookId, 5);
    // Dead letters 0-3 match; 4 is delivered.
    await h.db.execute(sql`update deliveries set status = case when id = ${ids[4]} then 'delivered' else 'dead_letter' end where id in ${ids}`);
    const operation = (await createRetryOperation(h.db, { projectId: key.projectId, webhookId, statuses: ['dead_letter', 'failed'], since: before, until: new Date() }, 3)) as OperationView;
    const selected = async () => (await h.db.select().from(operationDeliveries).where(eq(operationDeliveries.operationId, operation.id))).map((row) => row.deliveryId).sort();
    const current = async () => (await h.db.select().from(operations).where(eq(operations.id, operation.id)))[0]!;

    expect(await selectOperationPage(h.db, await current(), 3)).toBe(3);
    expect(await selected()).toEqual(ids.slice(0, 3));
    expect(await current()).toMatchObject({ selectionCursor: ids[2], selectionComplete: false });
    // Repeated after a crash: nothing is selected twice.
    await h.db.update(operations).set({ selectionCursor: null }).where(eq(operations.id, operation.id));
    expect(await selectOperationPage(h.db, await current(), 3)).toBe(3);
    expect(await selected()).toEqual(ids.slice(0, 3));
    expect(await selectOperationPage(h.db, await current(), 3)).toBe(1);
    expect(await selected()).toEqual(ids.slice(0, 4));
    expect(await current()).toMatchObject({ selectionCursor: ids[3], selectionComplete: true });
  });
});
