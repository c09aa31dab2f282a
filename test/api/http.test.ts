import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve } from '@hono/node-server';
import { Client, Connection } from '@temporalio/client';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config.ts';
import { createApp, OPENAPI_PATH } from '../../src/app.ts';
import type { AppDeps } from '../../src/api/env.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { openTestDatabase } from '../support/database.ts';
import { connectToTestTemporal, docauthData, startHarness, type Harness, type TestResponse } from '../support/harness.ts';

const BASE = '/api-gateway/v2';
const GENERATED_REQUEST_ID = /^req_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Key = Awaited<ReturnType<Harness['createKey']>>;

let h: Harness;
let key: Key;
let webhookId: string;
let deliveryId: string;

/** A JSON log line as pino writes it. */
interface LogLine {
  level: number;
  msg: string;
  requestId?: string;
  dependency?: string;
  err?: { message?: string; stack?: string };
}

const parseLogs = (lines: readonly string[]): LogLine[] => lines.map((line) => JSON.parse(line) as LogLine);

/** Deps of an app of its own, so a test can break one part (database, Temporal) and watch the logs. */
function isolatedDeps(overrides: Partial<AppDeps>, logs: string[]): AppDeps {
  return {
    db: h.db,
    temporal: h.client,
    scheduler: h.scheduler,
    secretBox: h.secretBox,
    producerToken: h.producerToken,
    admission: parseConfig({}).admission,
    logger: createLogger('debug', {}, { write: (line: string) => void logs.push(line) }),
    metrics: createMetrics(),
    ...overrides,
  };
}

async function json(response: Response): Promise<TestResponse> {
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, text };
}

beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
  const created = await h.request('POST', `${BASE}/webhooks`, {
    token: key.token,
    body: { api_key_id: key.id, url: 'https://example.com/hooks', events: ['docauth.completed'] },
  });
  webhookId = created.body.data.id;
  const published = await h.publish({ project_id: key.projectId, event: 'docauth.completed', data: docauthData() });
  deliveryId = published.body.data.delivery_ids[0];
});
afterAll(() => h.stop());

describe('request ids', () => {
  it('puts the X-Request-Id header in meta.request_id of every JSON response, success or error', async () => {
    const stranger = await h.createKey();
    const webhook = `${BASE}/webhooks/${webhookId}`;
    const responses: [string, TestResponse][] = [
      ['create', await h.request('POST', `${BASE}/webhooks`, {
        token: key.token,
        body: { api_key_id: key.id, url: 'https://example.com/other', events: ['docauth.completed'] },
      })],
      ['list', await h.request('GET', `${BASE}/webhooks`, { token: key.token })],
      ['get', await h.request('GET', webhook, { token: key.token })],
      ['patch', await h.request('PATCH', webhook, { token: key.token, body: { headers: { 'X-Tag': '1' } } })],
      ['rotate', await h.request('POST', `${webhook}/rotate-secret`, { token: key.token })],
      ['deliveries', await h.request('GET', `${webhook}/deliveries`, { token: key.token })],
      ['delivery', await h.request('GET', `${webhook}/deliveries/${deliveryId}`, { token: key.token })],
      ['attempts', await h.request('GET', `${webhook}/deliveries/${deliveryId}/attempts`, { token: key.token })],
      ['publish', await h.publish({ project_id: 'prj_none', event: 'docauth.completed', data: docauthData() })],
      ['400', await h.request('PATCH', webhook, { token: key.token, body: { status: 'paused' } })],
      ['401', await h.request('GET', `${BASE}/webhooks`)],
      ['403', await h.request('GET', webhook, { token: stranger.token })],
      ['404', await h.request('GET', '/nowhere')],
      ['405', await h.request('PUT', webhook, { token: key.token })],
      ['409', await h.request('POST', `${webhook}/deliveries/${deliveryId}/retry`, { token: key.token })],
    ];
    const ids = new Set<string>();
    for (const [label, response] of responses) {
      const header = response.headers.get('X-Request-Id');
      expect({ label, header }).toEqual({ label, header: expect.stringMatching(GENERATED_REQUEST_ID) });
      expect({ label, requestId: response.body?.meta?.request_id }).toEqual({ label, requestId: header });
      ids.add(header!);
    }
    expect(ids.size).toBe(responses.length);
  });

  it('sets X-Request-Id on a 204 response, which has no body', async () => {
    const created = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      body: { api_key_id: key.id, url: 'https://example.com/doomed', events: ['docauth.completed'] },
    });
    const response = await h.request('DELETE', `${BASE}/webhooks/${created.body.data.id}`, { token: key.token });
    expect(response.status).toBe(204);
    expect(response.text).toBe('');
    expect(response.headers.get('X-Request-Id')).toMatch(GENERATED_REQUEST_ID);
  });

  it.each(['trace-1.2:abc_DEF', 'a'.repeat(128)])(
    'keeps the well-formed incoming X-Request-Id %s and logs with it',
    async (incoming) => {
      const response = await h.request('POST', `${BASE}/webhooks`, {
        token: key.token,
        headers: { 'X-Request-Id': incoming },
        body: { api_key_id: key.id, url: 'https://example.com/traced', events: ['docauth.completed'] },
      });
      expect(response.status).toBe(201);
      expect(response.headers.get('X-Request-Id')).toBe(incoming);
      expect(response.body.meta.request_id).toBe(incoming);
      const created = parseLogs(h.logs).find((line) => line.msg === 'webhook created' && line.requestId === incoming);
      expect(created).toBeDefined();
    },
  );

  it.each([
    ['too long', 'a'.repeat(129)],
    ['with spaces', 'has spaces in it'],
    ['with a slash', 'a/b'],
    ['with a semicolon', 'a;b'],
  ])('replaces an incoming X-Request-Id %s with a generated one', async (_label, incoming) => {
    const response = await h.request('GET', `${BASE}/webhooks`, { token: key.token, headers: { 'X-Request-Id': incoming } });
    expect(response.status).toBe(200);
    expect(response.headers.get('X-Request-Id')).toMatch(GENERATED_REQUEST_ID);
    expect(response.body.meta.request_id).toBe(response.headers.get('X-Request-Id'));
  });
});

describe('unknown routes and wrong methods', () => {
  it.each([
    ['/nowhere', undefined],
    [`${BASE}/nowhere`, undefined],
    [`${BASE}/webhooks/`, 'token'],
    [`${BASE}/webhooks/wh_x/`, 'token'],
    [`${BASE}/webhooks/wh_x/deliveries/dlv_x/attempts/extra`, 'token'],
    [`${BASE}/openapiXjson`, undefined],
    ['/docs/', undefined],
  ])('answers GET %s with 404 not_found in the v2 body', async (path, auth) => {
    const response = await h.request('GET', path, auth ? { token: key.token } : {});
    expect(response.status).toBe(404);
    expect(response.body).toEqual({
      error: { code: 'not_found', message: `no route for GET ${path}` },
      meta: { request_id: response.headers.get('X-Request-Id') },
    });
    expect(response.headers.get('Allow')).toBeNull();
  });

  it.each([
    ['PUT', `${BASE}/webhooks/{id}`, 'GET, PATCH, DELETE'],
    ['DELETE', `${BASE}/webhooks`, 'POST, GET'],
    ['GET', `${BASE}/webhooks/{id}/rotate-secret`, 'POST'],
    ['POST', `${BASE}/webhooks/{id}/deliveries`, 'GET'],
    ['DELETE', `${BASE}/webhooks/{id}/deliveries/{delivery_id}/retry`, 'POST'],
    ['PATCH', `${BASE}/webhooks/{id}/deliveries/{delivery_id}`, 'GET'],
    ['GET', '/internal/v1/events', 'POST'],
    ['POST', OPENAPI_PATH, 'GET'],
    ['POST', '/healthz', 'GET'],
    ['DELETE', '/docs', 'GET'],
  ])('answers %s %s with 405, the v2 body and Allow: %s', async (method, template, allow) => {
    const path = template.replace('{id}', webhookId).replace('{delivery_id}', deliveryId);
    const token = path.startsWith('/internal/') ? h.producerToken : key.token;
    const response = await h.request(method, path, { token });
    expect(response.status).toBe(405);
    expect(response.headers.get('Allow')).toBe(allow);
    expect(response.body).toEqual({
      error: { code: 'method_not_allowed', message: `${method} is not allowed here; use ${allow}` },
      meta: { request_id: response.headers.get('X-Request-Id') },
    });
  });
});

describe("each resource's guard", () => {
  it.each([
    ['GET', `${BASE}/webhooks`],
    ['GET', `${BASE}/webhooks/wh_x/nowhere`],
    ['PUT', `${BASE}/webhooks/wh_x`],
    ['GET', `${BASE}/webhooks/wh_x/deliveries`],
    ['POST', `${BASE}/portal/sessions`],
    ['GET', `${BASE}/portal/nowhere`],
  ])('answers %s %s without an API key with 401, before any route is matched', async (method, path) => {
    const response = await h.request(method, path);
    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe('invalid_api_key');
  });
});

describe('with the database closed', () => {
  const logs: string[] = [];
  let app: ReturnType<typeof createApp>;
  let token: string;

  beforeAll(async () => {
    const database = await openTestDatabase();
    ({ token } = await createApiKey(database.db, { projectId: 'prj_broken', services: ['webhooks'] }));
    app = createApp(isolatedDeps({ db: database.db }, logs));
    await database.close();
  });

  it('answers 500 internal_error without internals and logs the error with the request id', async () => {
    const response = await json(await app.request(`${BASE}/webhooks`, { headers: { Authorization: `Bearer ${token}` } }));

    expect(response.status).toBe(500);
    const requestId = response.headers.get('X-Request-Id');
    expect(response.body).toEqual({
      error: { code: 'internal_error', message: 'internal error; safe to retry with backoff' },
      meta: { request_id: requestId },
    });
    expect(response.text).not.toMatch(/stack|\bat |Error|PGlite|postgres|CONNECTION|127\.0\.0\.1|select /);
    const logged = parseLogs(logs).find((line) => line.msg === 'unhandled error');
    expect(logged).toMatchObject({ level: 50, requestId });
    expect(logged?.err?.stack).toBeTruthy();
  });

  it('answers GET /readyz with 503 service_unavailable naming the database, logging why', async () => {
    const response = await json(await app.request('/readyz'));

    expect(response.status).toBe(503);
    const requestId = response.headers.get('X-Request-Id');
    expect(response.body).toEqual({
      error: { code: 'service_unavailable', message: 'not ready: database unreachable' },
      meta: { request_id: requestId },
    });
    const logged = parseLogs(logs).find((line) => line.msg === 'not ready');
    expect(logged).toMatchObject({ dependency: 'database', requestId });
    expect(logged?.err?.message).toBeTruthy();
  });
});

describe('health checks', () => {
  it('answers GET /healthz with 200', async () => {
    const response = await h.request('GET', '/healthz');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ok' });
  });

  it('answers GET /readyz with 200 when the database and Temporal answer', async () => {
    const response = await h.request('GET', '/readyz');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ready', checks: { database: 'ok', temporal: 'ok' } });
  });

  it('answers GET /readyz with 503 naming temporal when its namespace does not exist there', async () => {
    const connection = await connectToTestTemporal((options) => Connection.connect(options));
    try {
      const app = createApp(isolatedDeps({ temporal: new Client({ connection, namespace: 'no-such-namespace' }) }, []));
      const response = await json(await app.request('/readyz'));
      expect(response.status).toBe(503);
      expect(response.body.error).toEqual({ code: 'service_unavailable', message: 'not ready: temporal unreachable' });
    } finally {
      await connection.close();
    }
  });

  it('answers GET /readyz with 503 naming temporal when its connection is closed', async () => {
    const connection = await connectToTestTemporal((options) => Connection.connect(options));
    const client = new Client({ connection });
    await connection.close();
    const app = createApp(isolatedDeps({ temporal: client }, []));

    const response = await json(await app.request('/readyz'));

    expect(response.status).toBe(503);
    expect(response.body.error).toEqual({ code: 'service_unavailable', message: 'not ready: temporal unreachable' });
  });
});

describe('over a real port', () => {
  it('serves create, list, get, patch, rotate and delete to fetch', async () => {
    const server = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' });
    try {
      await new Promise((resolve) => server.once('listening', resolve));
      const { port } = server.address() as AddressInfo;
      const call = async (method: string, path: string, body?: unknown) =>
        json(
          await fetch(`http://127.0.0.1:${port}${BASE}${path}`, {
            method,
            headers: { Authorization: `Bearer ${key.token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
            ...(body ? { body: JSON.stringify(body) } : {}),
          }),
        );

      const created = await call('POST', '/webhooks', {
        api_key_id: key.id,
        url: 'https://smoke.example.com/in',
        events: ['docauth.completed'],
      });
      expect(created.status).toBe(201);
      expect(created.headers.get('Content-Type')).toMatch(/^application\/json/);
      const id: string = created.body.data.id;

      const list = await call('GET', '/webhooks');
      expect(list.status).toBe(200);
      expect(list.body.data.map((webhook: { id: string }) => webhook.id)).toContain(id);

      const got = await call('GET', `/webhooks/${id}`);
      expect(got.status).toBe(200);
      expect(got.body.data.url).toBe('https://smoke.example.com/in');

      const patched = await call('PATCH', `/webhooks/${id}`, { status: 'disabled' });
      expect(patched.status).toBe(200);
      expect(patched.body.data.status).toBe('disabled');

      const rotated = await call('POST', `/webhooks/${id}/rotate-secret`);
      expect(rotated.status).toBe(200);
      expect(rotated.body.data.secret).not.toBe(created.body.data.secret);

      const deleted = await call('DELETE', `/webhooks/${id}`);
      expect(deleted.status).toBe(204);
      expect(deleted.text).toBe('');
      expect((await call('GET', `/webhooks/${id}`)).status).toBe(404);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
