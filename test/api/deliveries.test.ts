import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { eq } from 'drizzle-orm';
import { parseConfig } from '../../src/config.ts';
import { createApp } from '../../src/app.ts';
import { deliveries, deliveryAttempts, events, webhooks, type DeliveryRow } from '../../src/db/schema.ts';
import { newId } from '../../src/ids.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { DeliveryScheduler } from '../../src/temporal/scheduler.ts';
import { connectToTestTemporal, docauthData, startHarness, type Harness } from '../support/harness.ts';

const BASE = '/api-gateway/v2';
const HOUR_AGO = Date.now() - 3_600_000;

type Key = Awaited<ReturnType<Harness['createKey']>>;

/** Stored fields of a delivery a test sets; `at` is its creation time. */
type DeliverySpec = Partial<
  Pick<DeliveryRow, 'status' | 'attemptCount' | 'deliveredAt' | 'lastError' | 'lastStatusCode' | 'nextRetryAt'>
> & { at: number };

let h: Harness;
let key: Key;

async function createWebhook(owner: Key = key, url = 'https://example.com/hooks'): Promise<string> {
  const response = await h.request('POST', `${BASE}/webhooks`, {
    token: owner.token,
    body: { api_key_id: owner.id, url, events: ['docauth.completed'] },
  });
  expect(response.status).toBe(201);
  return response.body.data.id;
}

/** Stores deliveries of `webhookId` straight in the database, one event each, created at the given times. */
async function insertDeliveries(webhookId: string, specs: DeliverySpec[]): Promise<DeliveryRow[]> {
  const [webhook] = await h.db.select().from(webhooks).where(eq(webhooks.id, webhookId));
  if (!webhook) throw new Error(`no webhook ${webhookId}`);
  const eventRows = specs.map((spec) => {
    const id = newId('event', spec.at);
    return {
      id,
      projectId: webhook.projectId,
      producerEventId: id,
      event: 'docauth.completed',
      occurredAt: new Date(spec.at),
      payload: docauthData(),
      createdAt: new Date(spec.at),
      dispatchedAt: new Date(spec.at),
    };
  });
  await h.db.insert(events).values(eventRows);
  return h.db
    .insert(deliveries)
    .values(
      specs.map(({ at, ...fields }, index) => ({
        id: newId('delivery', at),
        webhookId,
        eventId: eventRows[index]!.id,
        event: 'docauth.completed',
        status: 'pending' as const,
        createdAt: new Date(at),
        updatedAt: new Date(at),
        ...fields,
      })),
    )
    .returning();
}

async function storedDelivery(id: string): Promise<DeliveryRow | undefined> {
  const [row] = await h.db.select().from(deliveries).where(eq(deliveries.id, id));
  return row;
}

const listPath = (webhookId: string, query = '') => `${BASE}/webhooks/${webhookId}/deliveries${query ? `?${query}` : ''}`;

beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
});
afterAll(() => h.stop());

describe('GET /webhooks/{id}/deliveries', () => {
  it('lists deliveries newest first with the fields of spec 2.2, each present only when it applies', async () => {
    const webhookId = await createWebhook();
    const at = (minutes: number) => HOUR_AGO + minutes * 60_000;
    const [pending, processing, failed, dead, delivered] = await insertDeliveries(webhookId, [
      { at: at(1) },
      { at: at(2), status: 'processing', attemptCount: 1 },
      {
        at: at(3),
        status: 'failed',
        attemptCount: 2,
        lastError: 'HTTP 503 Service Unavailable',
        lastStatusCode: 503,
        nextRetryAt: new Date(at(3) + 2_000),
      },
      { at: at(4), status: 'dead_letter', attemptCount: 5, lastError: 'no response within 30 seconds' },
      { at: at(5), status: 'delivered', attemptCount: 1, lastStatusCode: 200, deliveredAt: new Date(at(5) + 150) },
    ]);
    const base = (row: DeliveryRow | undefined) => ({
      id: row!.id,
      webhook_config_id: webhookId,
      event: 'docauth.completed',
      created_at: row!.createdAt.toISOString(),
    });

    const response = await h.request('GET', listPath(webhookId), { token: key.token });

    expect(response.status).toBe(200);
    expect(response.body.message).toBe('5 deliveries');
    expect(response.body.meta).toEqual({ request_id: response.headers.get('X-Request-Id'), has_more: false });
    expect(response.body.data).toEqual([
      {
        ...base(delivered),
        status: 'delivered',
        attempt_count: 1,
        last_status_code: 200,
        delivered_at: new Date(at(5) + 150).toISOString(),
      },
      { ...base(dead), status: 'dead_letter', attempt_count: 5, last_error: 'no response within 30 seconds' },
      {
        ...base(failed),
        status: 'failed',
        attempt_count: 2,
        last_error: 'HTTP 503 Service Unavailable',
        last_status_code: 503,
        next_retry_at: new Date(at(3) + 2_000).toISOString(),
      },
      { ...base(processing), status: 'processing', attempt_count: 1 },
      { ...base(pending), status: 'pending', attempt_count: 0 },
    ]);
  });

  it('lists the pending deliveries of published events, and an empty list before any', async () => {
    const project = await h.createKey();
    const webhookId = await createWebhook(project);
    const empty = await h.request('GET', listPath(webhookId), { token: project.token });
    expect(empty.body).toMatchObject({ data: [], message: '0 deliveries', meta: { has_more: false } });

    const published = [];
    for (let i = 0; i < 3; i += 1) {
      const response = await h.publish({ project_id: project.projectId, event: 'docauth.completed', data: docauthData() });
      expect(response.status).toBe(202);
      published.push(response.body.data.delivery_ids[0]);
    }
    const response = await h.request('GET', listPath(webhookId), { token: project.token });
    expect(response.body.data.map((d: { id: string }) => d.id)).toEqual([...published].reverse());
    for (const delivery of response.body.data) {
      expect(delivery).toEqual({
        id: expect.stringMatching(/^dlv_[0-9a-z]{26}$/),
        webhook_config_id: webhookId,
        event: 'docauth.completed',
        status: 'pending',
        attempt_count: 0,
        created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      });
    }
  });

  describe('pagination', () => {
    let webhookId: string;
    let newestFirst: DeliveryRow[];

    beforeAll(async () => {
      webhookId = await createWebhook();
      const statuses = ['failed', 'delivered', 'dead_letter'] as const;
      const rows = await insertDeliveries(
        webhookId,
        Array.from({ length: 101 }, (_, i) => ({ at: HOUR_AGO + i * 1_000, status: statuses[i % 3]! })),
      );
      newestFirst = [...rows].reverse();
    });

    it('returns 50 deliveries by default, with has_more and the last id as next_cursor', async () => {
      const response = await h.request('GET', listPath(webhookId), { token: key.token });
      expect(response.body.data).toHaveLength(50);
      expect(response.body.data.map((d: { id: string }) => d.id)).toEqual(newestFirst.slice(0, 50).map((d) => d.id));
      expect(response.body.meta).toMatchObject({ has_more: true, next_cursor: newestFirst[49]!.id });
    });

    it.each([1, 100])('honours limit=%i', async (limit) => {
      const response = await h.request('GET', listPath(webhookId, `limit=${limit}`), { token: key.token });
      expect(response.status).toBe(200);
      expect(response.body.data.map((d: { id: string }) => d.id)).toEqual(newestFirst.slice(0, limit).map((d) => d.id));
      expect(response.body.meta).toMatchObject({ has_more: true, next_cursor: newestFirst[limit - 1]!.id });
    });

    it('walks every page with starting_after, without duplicates or gaps, and the last page has no cursor', async () => {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      for (;;) {
        const response = await h.request(
          'GET',
          listPath(webhookId, `limit=7${cursor ? `&starting_after=${cursor}` : ''}`),
          { token: key.token },
        );
        expect(response.status).toBe(200);
        pages += 1;
        seen.push(...response.body.data.map((d: { id: string }) => d.id));
        if (!response.body.meta.has_more) {
          expect(response.body.meta).not.toHaveProperty('next_cursor');
          break;
        }
        cursor = response.body.meta.next_cursor;
        expect(cursor).toBe(seen.at(-1));
      }
      expect(pages).toBe(15);
      expect(seen).toEqual(newestFirst.map((d) => d.id));
    });

    it('walks the pages of a status filter and returns only that status', async () => {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const response = await h.request(
          'GET',
          listPath(webhookId, `status=dead_letter&limit=10${cursor ? `&starting_after=${cursor}` : ''}`),
          { token: key.token },
        );
        expect(response.body.data.every((d: { status: string }) => d.status === 'dead_letter')).toBe(true);
        seen.push(...response.body.data.map((d: { id: string }) => d.id));
        cursor = response.body.meta.next_cursor;
      } while (cursor);
      expect(seen).toEqual(newestFirst.filter((d) => d.status === 'dead_letter').map((d) => d.id));
      expect(seen).toHaveLength(33);
    });

    it('filters by event', async () => {
      const response = await h.request('GET', listPath(webhookId, 'event=docauth.completed&limit=100'), {
        token: key.token,
      });
      expect(response.body.data).toHaveLength(100);
      expect(response.body.data.every((d: { event: string }) => d.event === 'docauth.completed')).toBe(true);
    });

    it('returns an empty last page after the oldest delivery', async () => {
      const oldest = newestFirst.at(-1)!;
      const response = await h.request('GET', listPath(webhookId, `starting_after=${oldest.id}`), { token: key.token });
      expect(response.body).toMatchObject({ data: [], meta: { has_more: false } });
    });
  });

  it.each([
    ['limit=0', 'limit: must be at least 1'],
    ['limit=101', 'limit: must be at most 100'],
    ['limit=abc', 'limit: must be a number'],
    ['limit=1.5', 'limit: must be a whole number'],
    ['limit=', 'limit: must be at least 1'],
    ['status=bogus', 'status: must be one of: pending, processing, delivered, failed, dead_letter'],
    ['event=docauth.started', 'event: must be one of: docauth.completed'],
    ['starting_after=garbage', 'starting_after: must be a delivery id'],
  ])('refuses %s with 400 invalid_request naming the field', async (query, message) => {
    const webhookId = await createWebhook();
    const response = await h.request('GET', listPath(webhookId, query), { token: key.token });
    expect(response.status).toBe(400);
    expect(response.body.error).toEqual({ code: 'invalid_request', message });
    expect(response.body.meta.request_id).toBe(response.headers.get('X-Request-Id'));
  });

  it('answers 404 for an unknown webhook', async () => {
    const response = await h.request('GET', listPath('wh_unknown'), { token: key.token });
    expect(response.status).toBe(404);
    expect(response.body.error).toEqual({ code: 'not_found', message: 'webhook wh_unknown not found' });
  });
});

describe('GET /webhooks/{id}/deliveries/{delivery_id}', () => {
  it('returns the delivery as the list shows it', async () => {
    const webhookId = await createWebhook();
    const [row] = await insertDeliveries(webhookId, [
      { at: HOUR_AGO, status: 'failed', attemptCount: 1, lastError: 'HTTP 500', lastStatusCode: 500, nextRetryAt: new Date() },
    ]);
    const one = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${row!.id}`, { token: key.token });
    const list = await h.request('GET', listPath(webhookId), { token: key.token });
    expect(one.status).toBe(200);
    expect(one.body.message).toBe('Delivery retrieved');
    expect(one.body.data).toEqual(list.body.data[0]);
    expect(one.body.data).toMatchObject({ id: row!.id, status: 'failed', last_status_code: 500 });
  });

  it('answers 404 for an unknown delivery and for a delivery of another webhook of the project', async () => {
    const webhookId = await createWebhook();
    const otherWebhookId = await createWebhook();
    const [other] = await insertDeliveries(otherWebhookId, [{ at: HOUR_AGO }]);
    for (const deliveryId of ['dlv_unknown', other!.id]) {
      const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}`, {
        token: key.token,
      });
      expect(response.status).toBe(404);
      expect(response.body.error).toEqual({
        code: 'not_found',
        message: `delivery ${deliveryId} not found for webhook ${webhookId}`,
      });
    }
  });
});

describe('GET /webhooks/{id}/deliveries/{delivery_id}/attempts', () => {
  it('returns an empty list for a delivery not yet attempted', async () => {
    const project = await h.createKey();
    const webhookId = await createWebhook(project);
    const published = await h.publish({ project_id: project.projectId, event: 'docauth.completed', data: docauthData() });
    const deliveryId = published.body.data.delivery_ids[0];
    const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/attempts`, {
      token: project.token,
    });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ data: [], message: '0 attempts' });
  });

  it('lists attempts first attempt first, each field present only when known', async () => {
    const webhookId = await createWebhook();
    const [delivery] = await insertDeliveries(webhookId, [{ at: HOUR_AGO, status: 'processing', attemptCount: 3 }]);
    const started = (n: number) => new Date(HOUR_AGO + n * 1_000);
    const rows = [
      { attemptNumber: 2, outcome: 'timeout' as const, durationMs: 30_000, error: 'no response within 30 seconds' },
      { attemptNumber: 3, outcome: 'in_progress' as const },
      { attemptNumber: 1, outcome: 'http_error' as const, durationMs: 42, statusCode: 503, error: 'HTTP 503' },
    ].map((attempt) => ({
      id: newId('attempt', started(attempt.attemptNumber).getTime()),
      deliveryId: delivery!.id,
      startedAt: started(attempt.attemptNumber),
      ...attempt,
    }));
    await h.db.insert(deliveryAttempts).values(rows);
    const byNumber = (n: number) => rows.find((row) => row.attemptNumber === n)!;

    const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${delivery!.id}/attempts`, {
      token: key.token,
    });

    expect(response.status).toBe(200);
    expect(response.body.message).toBe('3 attempts');
    expect(response.body.data).toEqual([
      {
        id: byNumber(1).id,
        delivery_id: delivery!.id,
        attempt_number: 1,
        started_at: started(1).toISOString(),
        duration_ms: 42,
        status_code: 503,
        outcome: 'http_error',
        error: 'HTTP 503',
      },
      {
        id: byNumber(2).id,
        delivery_id: delivery!.id,
        attempt_number: 2,
        started_at: started(2).toISOString(),
        duration_ms: 30_000,
        outcome: 'timeout',
        error: 'no response within 30 seconds',
      },
      {
        id: byNumber(3).id,
        delivery_id: delivery!.id,
        attempt_number: 3,
        started_at: started(3).toISOString(),
        outcome: 'in_progress',
      },
    ]);
  });
});

describe('POST /webhooks/{id}/deliveries/{delivery_id}/retry', () => {
  const retryPath = (webhookId: string, deliveryId: string) =>
    `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`;

  it('answers 404 for an unknown delivery and for a delivery of another webhook of the project', async () => {
    const webhookId = await createWebhook();
    const [other] = await insertDeliveries(await createWebhook(), [{ at: HOUR_AGO, status: 'failed' }]);
    for (const deliveryId of ['dlv_unknown', other!.id]) {
      const response = await h.request('POST', retryPath(webhookId, deliveryId), { token: key.token });
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe('not_found');
    }
    expect((await storedDelivery(other!.id))?.status).toBe('failed');
  });

  it.each(['delivered', 'pending', 'processing'] as const)(
    'refuses a %s delivery with 409 conflict naming its status, changing nothing',
    async (status) => {
      const webhookId = await createWebhook();
      const [row] = await insertDeliveries(webhookId, [
        { at: HOUR_AGO, status, ...(status === 'delivered' ? { deliveredAt: new Date(HOUR_AGO + 100) } : {}) },
      ]);
      const response = await h.request('POST', retryPath(webhookId, row!.id), { token: key.token });
      expect(response.status).toBe(409);
      expect(response.body.error).toEqual({
        code: 'conflict',
        message: `delivery ${row!.id} is ${status}; only failed or dead_letter deliveries can be retried`,
      });
      expect(await storedDelivery(row!.id)).toEqual(row);
    },
  );

  it.each(['failed', 'dead_letter'] as const)(
    'queues a %s delivery for retry: 202, pending without next_retry_at, and its workflow is signalled',
    async (status) => {
      const webhookId = await createWebhook();
      const [row] = await insertDeliveries(webhookId, [
        {
          at: HOUR_AGO,
          status,
          attemptCount: 5,
          lastError: 'HTTP 500',
          lastStatusCode: 500,
          nextRetryAt: status === 'failed' ? new Date(Date.now() + 60_000) : null,
        },
      ]);

      const response = await h.request('POST', retryPath(webhookId, row!.id), { token: key.token });

      expect(response.status).toBe(202);
      expect(response.body.message).toBe(`Delivery ${row!.id} is queued for retry`);
      expect(response.body.data).toEqual({
        id: row!.id,
        webhook_config_id: webhookId,
        event: 'docauth.completed',
        status: 'pending',
        attempt_count: 5,
        created_at: row!.createdAt.toISOString(),
        last_error: 'HTTP 500',
        last_status_code: 500,
      });
      expect(await storedDelivery(row!.id)).toMatchObject({ status: 'pending', nextRetryAt: null });

      const handle = h.client.workflow.getHandle(row!.id);
      const description = await handle.describe();
      expect(description).toMatchObject({ workflowId: row!.id, type: 'deliveryWorkflow', taskQueue: h.taskQueue });
      expect(description.status.name).toBe('RUNNING');
      const history = await handle.fetchHistory();
      const signals = (history.events ?? []).map((event) => event.workflowExecutionSignaledEventAttributes?.signalName);
      expect(signals).toContain('retry');
    },
  );

  it('queues two simultaneous retries of one delivery once; the other gets 409 naming the current status', async () => {
    const webhookId = await createWebhook();
    const [row] = await insertDeliveries(webhookId, [{ at: HOUR_AGO, status: 'failed', attemptCount: 2 }]);

    const responses = await Promise.all(
      [1, 2].map(() => h.request('POST', retryPath(webhookId, row!.id), { token: key.token })),
    );

    expect(responses.map((response) => response.status).sort()).toEqual([202, 409]);
    const conflict = responses.find((response) => response.status === 409);
    expect(conflict?.body.error).toEqual({
      code: 'conflict',
      message: `delivery ${row!.id} is pending; only failed or dead_letter deliveries can be retried`,
    });
    expect((await storedDelivery(row!.id))?.status).toBe('pending');
  });

  it("signals the running workflow of a published delivery instead of starting another", async () => {
    const project = await h.createKey();
    const webhookId = await createWebhook(project);
    const published = await h.publish({ project_id: project.projectId, event: 'docauth.completed', data: docauthData() });
    const deliveryId: string = published.body.data.delivery_ids[0];
    const firstRun = (await h.client.workflow.getHandle(deliveryId).describe()).runId;
    await h.db.update(deliveries).set({ status: 'dead_letter', attemptCount: 5 }).where(eq(deliveries.id, deliveryId));

    const response = await h.request('POST', retryPath(webhookId, deliveryId), { token: project.token });

    expect(response.status).toBe(202);
    const description = await h.client.workflow.getHandle(deliveryId).describe();
    expect(description.runId).toBe(firstRun);
    expect(description.status.name).toBe('RUNNING');
  });

  it('answers 500 and leaves the delivery dead_letter when Temporal cannot be signalled', async () => {
    const webhookId = await createWebhook();
    const [row] = await insertDeliveries(webhookId, [
      { at: HOUR_AGO, status: 'dead_letter', attemptCount: 5, lastError: 'HTTP 500', lastStatusCode: 500 },
    ]);
    const connection = await connectToTestTemporal((options) => NativeConnection.connect(options));
    const closedClient = new Client({ connection });
    await connection.close();
    const logs: string[] = [];
    const app = createApp({
      db: h.db,
      temporal: closedClient,
      scheduler: new DeliveryScheduler(closedClient, h.taskQueue),
      secretBox: h.secretBox,
      producerToken: h.producerToken,
      admission: parseConfig({}).admission,
      logger: createLogger('info', {}, { write: (line: string) => void logs.push(line) }),
      metrics: createMetrics(),
    });

    const response = await app.request(retryPath(webhookId, row!.id), {
      method: 'POST',
      headers: { Authorization: `Bearer ${key.token}` },
    });

    expect(response.status).toBe(500);
    expect(((await response.json()) as { error: unknown }).error).toEqual({
      code: 'internal_error',
      message: 'internal error; safe to retry with backoff',
    });
    const { updatedAt: _restoredAt, ...after } = (await storedDelivery(row!.id))!;
    const { updatedAt: _insertedAt, ...before } = row!;
    expect(after).toEqual(before);
    expect(logs.some((line) => line.includes('unhandled error'))).toBe(true);
  });
});

describe('POST /internal/v1/events (producer door)', () => {
  it.each([
    ['without a token', undefined, 'invalid_api_key'],
    ['with a wrong token', 'ptk_wrong', 'unauthorized'],
  ])('refuses a request %s with 401 and the v2 body, storing nothing', async (_label, token, code) => {
    const before = await h.db.$count(events);
    const response = await h.request('POST', '/internal/v1/events', {
      token,
      body: { project_id: key.projectId, event: 'docauth.completed', data: docauthData() },
    });
    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe(code);
    expect(response.body.meta.request_id).toBe(response.headers.get('X-Request-Id'));
    expect(await h.db.$count(events)).toBe(before);
  });

  it.each([
    [{ project_id: undefined }, 'project_id: is required'],
    [{ project_id: 'has space' }, 'project_id: must be 1-128 characters'],
    [{ id: 'x'.repeat(129) }, 'id: must be 1-128 characters'],
    [{ event: 'docauth.started' }, 'event: '],
    [{ occurred_at: 'yesterday' }, 'occurred_at: must be an ISO 8601 timestamp'],
    // Well-formed, but no timestamp column stores them: refused, never a 500.
    [{ occurred_at: '0000-01-01T00:00:00Z' }, 'occurred_at: must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z'],
    [{ occurred_at: '0001-01-01T00:30:00+01:00' }, 'occurred_at: must be between'],
    [{ occurred_at: '9999-12-31T23:59:59-23:59' }, 'occurred_at: must be between'],
    [{ data: undefined }, 'data: is required'],
    [{ data: docauthData({ result: 'maybe' }) }, 'data.result: '],
    [{ data: docauthData({ scores_applied: 'yes' }) }, 'data.scores_applied: '],
    [{ data: docauthData({ docauth_info: { birth_date: '1990-13-45' } }) }, 'data.docauth_info.birth_date: must be a date'],
    [{ extra: 1 }, 'unknown field: extra'],
  ])('refuses %j with 400 invalid_request naming the field', async (overrides, expected) => {
    const before = await h.db.$count(events);
    const response = await h.publish({
      project_id: key.projectId,
      event: 'docauth.completed',
      data: docauthData(),
      ...overrides,
    });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
    expect(response.body.error.message).toContain(expected);
    expect(await h.db.$count(events)).toBe(before);
  });

  it('returns the same event and deliveries when the same id is published twice', async () => {
    const project = await h.createKey();
    await createWebhook(project);
    const body = { id: 'producer-evt-1', project_id: project.projectId, event: 'docauth.completed', data: docauthData() };
    const first = await h.publish(body);
    const second = await h.publish(body);
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    expect(first.body.message).toBe('Event accepted for 1 delivery');
    expect(second.body.message).toBe('Event already accepted earlier; returning its deliveries');
    expect(second.body.data).toEqual(first.body.data);
    expect(first.body.data.delivery_ids).toHaveLength(1);
    expect(await h.db.$count(events, eq(events.projectId, project.projectId))).toBe(1);
  });

  it("creates deliveries only for the project's active webhooks", async () => {
    const project = await h.createKey();
    const active = await createWebhook(project, 'https://active.example.com/');
    const disabled = await createWebhook(project, 'https://disabled.example.com/');
    await h.request('PATCH', `${BASE}/webhooks/${disabled}`, { token: project.token, body: { status: 'disabled' } });
    const stranger = await h.createKey();
    const foreign = await createWebhook(stranger, 'https://stranger.example.com/');

    const response = await h.publish({ project_id: project.projectId, event: 'docauth.completed', data: docauthData() });

    expect(response.status).toBe(202);
    expect(response.body.data.delivery_ids).toHaveLength(1);
    const [delivery] = await h.db.select().from(deliveries).where(eq(deliveries.id, response.body.data.delivery_ids[0]));
    expect(delivery).toMatchObject({ webhookId: active, status: 'pending', event: 'docauth.completed' });
    expect(await h.db.$count(deliveries, eq(deliveries.webhookId, disabled))).toBe(0);
    expect(await h.db.$count(deliveries, eq(deliveries.webhookId, foreign))).toBe(0);
  });

  it('accepts an event of a project without webhooks with no deliveries', async () => {
    const response = await h.publish({ project_id: 'prj_nobody', event: 'docauth.completed', data: docauthData() });
    expect(response.status).toBe(202);
    expect(response.body.data).toEqual({ event_id: expect.stringMatching(/^evt_/), delivery_ids: [] });
    expect(response.body.message).toBe('Event accepted for 0 deliveries');
  });
});
