import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq, sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.ts';
import { revokeApiKey } from '../../src/db/queries/api-keys.ts';
import { apiKeys, deliveries, webhooks } from '../../src/db/schema.ts';
import { sha256Hex } from '../../src/secrets/crypto.ts';
import { docauthData, startHarness, type Harness, type TestResponse } from '../support/harness.ts';

const BASE = '/api-gateway/v2';

type Key = Awaited<ReturnType<Harness['createKey']>>;

/** What an operation is called on: a webhook and one of its deliveries. */
interface Target {
  webhookId: string;
  deliveryId: string;
}

/** One v2 operation: the 8 of spec 4, plus get one delivery and its attempts. */
interface Operation {
  name: string;
  method: string;
  path: (target: Target) => string;
  body?: (key: Key) => unknown;
  /** Whether it acts on one webhook (so another project's key is refused with 403). */
  scoped: boolean;
}

const OPERATIONS: Operation[] = [
  {
    name: 'POST /webhooks',
    method: 'POST',
    path: () => '/webhooks',
    body: (key) => ({ api_key_id: key.id, url: 'https://example.com/hooks', events: ['docauth.completed'] }),
    scoped: false,
  },
  { name: 'GET /webhooks', method: 'GET', path: () => '/webhooks', scoped: false },
  { name: 'GET /webhooks/{id}', method: 'GET', path: (t) => `/webhooks/${t.webhookId}`, scoped: true },
  {
    name: 'PATCH /webhooks/{id}',
    method: 'PATCH',
    path: (t) => `/webhooks/${t.webhookId}`,
    body: () => ({ url: 'https://attacker.example.com/', status: 'disabled' }),
    scoped: true,
  },
  { name: 'DELETE /webhooks/{id}', method: 'DELETE', path: (t) => `/webhooks/${t.webhookId}`, scoped: true },
  {
    name: 'POST /webhooks/{id}/rotate-secret',
    method: 'POST',
    path: (t) => `/webhooks/${t.webhookId}/rotate-secret`,
    scoped: true,
  },
  {
    name: 'GET /webhooks/{id}/deliveries',
    method: 'GET',
    path: (t) => `/webhooks/${t.webhookId}/deliveries`,
    scoped: true,
  },
  {
    name: 'POST /webhooks/{id}/deliveries/{delivery_id}/retry',
    method: 'POST',
    path: (t) => `/webhooks/${t.webhookId}/deliveries/${t.deliveryId}/retry`,
    scoped: true,
  },
  {
    name: 'GET /webhooks/{id}/deliveries/{delivery_id}',
    method: 'GET',
    path: (t) => `/webhooks/${t.webhookId}/deliveries/${t.deliveryId}`,
    scoped: true,
  },
  {
    name: 'GET /webhooks/{id}/deliveries/{delivery_id}/attempts',
    method: 'GET',
    path: (t) => `/webhooks/${t.webhookId}/deliveries/${t.deliveryId}/attempts`,
    scoped: true,
  },
];

let h: Harness;
let owner: Key;
let target: Target;

/**
 * Sends `operation` on the owner's webhook with the given Authorization header (none when
 * undefined); a create body names the API key of `caller`.
 */
function call(operation: Operation, authorization: string | undefined, caller: Key = owner): Promise<TestResponse> {
  return h.request(operation.method, `${BASE}${operation.path(target)}`, {
    headers: authorization === undefined ? {} : { Authorization: authorization },
    ...(operation.body ? { body: operation.body(caller) } : {}),
  });
}

/** The stored webhook and delivery of the owner, to show that a refused request changed nothing. */
async function snapshot() {
  const [webhook] = await h.db.select().from(webhooks).where(eq(webhooks.id, target.webhookId));
  const [delivery] = await h.db.select().from(deliveries).where(eq(deliveries.id, target.deliveryId));
  return { webhook, delivery, webhookCount: await h.db.$count(webhooks) };
}

/** Sends every operation with `authorization` and expects the same error each time, with nothing changed. */
async function expectEveryOperationRefused(
  authorization: string | undefined,
  expected: { status: number; code: string; message: string },
) {
  const before = await snapshot();
  for (const operation of OPERATIONS) {
    const response = await call(operation, authorization);
    expect({ operation: operation.name, status: response.status, error: response.body?.error }).toEqual({
      operation: operation.name,
      status: expected.status,
      error: { code: expected.code, message: expected.message },
    });
    expect(response.body.meta.request_id).toBe(response.headers.get('X-Request-Id'));
  }
  expect(await snapshot()).toEqual(before);
}

beforeAll(async () => {
  h = await startHarness();
  owner = await h.createKey();
  const created = await h.request('POST', `${BASE}/webhooks`, {
    token: owner.token,
    body: { api_key_id: owner.id, url: 'https://owner.example.com/hooks', events: ['docauth.completed'] },
  });
  expect(created.status).toBe(201);
  const published = await h.publish({ project_id: owner.projectId, event: 'docauth.completed', data: docauthData() });
  expect(published.status).toBe(202);
  const deliveryId: string | undefined = published.body.data.delivery_ids[0];
  if (!deliveryId) throw new Error('the event produced no delivery');
  target = { webhookId: created.body.data.id, deliveryId };
  // A failed delivery: a manual retry by a caller who got through would change it.
  await h.db
    .update(deliveries)
    .set({ status: 'failed', attemptCount: 1, lastError: 'HTTP 503', lastStatusCode: 503 })
    .where(eq(deliveries.id, deliveryId));
});
afterAll(() => h.stop());

describe('the Authorization header', () => {
  const wellFormedUnknown = `sk_${'0'.repeat(26)}_${'A'.repeat(43)}`;

  it.each([
    ['no Authorization header', undefined, 'missing Authorization header'],
    ['a Basic credential', 'Basic dXNlcjpwYXNz', 'Authorization header must be "Bearer <API_TOKEN>"'],
    ['"Basic x"', 'Basic x', 'Authorization header must be "Bearer <API_TOKEN>"'],
    ['"Bearer" with no token', 'Bearer', 'Authorization header must be "Bearer <API_TOKEN>"'],
    ['a Bearer value with two words', 'Bearer abc def', 'Authorization header must be "Bearer <API_TOKEN>"'],
    ['a garbage token', 'Bearer garbage', 'API key is unknown or revoked'],
    ['a well-formed but unknown token', `Bearer ${wellFormedUnknown}`, 'API key is unknown or revoked'],
  ])('refuses %s on every v2 endpoint with 401 invalid_api_key', async (_label, authorization, message) => {
    await expectEveryOperationRefused(authorization, { status: 401, code: 'invalid_api_key', message });
  });

  it('refuses the id of a real key with a wrong secret part with 401 invalid_api_key', async () => {
    const [, idBody] = /^sk_([0-9a-z]{26})_/.exec(owner.token) ?? [];
    expect(idBody).toBeDefined();
    await expectEveryOperationRefused(`Bearer sk_${idBody}_${'B'.repeat(43)}`, {
      status: 401,
      code: 'invalid_api_key',
      message: 'API key is unknown or revoked',
    });
  });

  it('accepts the owner token on every read endpoint, the control for the refusals above', async () => {
    const statuses = [];
    for (const operation of OPERATIONS.filter((op) => op.method === 'GET')) {
      statuses.push((await call(operation, `Bearer ${owner.token}`)).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });
});

describe('API key state and services', () => {
  it('refuses a revoked key with 401 invalid_api_key on every v2 endpoint', async () => {
    const key = await h.createKey(owner.projectId);
    expect((await h.request('GET', `${BASE}/webhooks`, { token: key.token })).status).toBe(200);
    expect(await revokeApiKey(h.db, key.id)).toBeDefined();
    await expectEveryOperationRefused(`Bearer ${key.token}`, {
      status: 401,
      code: 'invalid_api_key',
      message: 'API key is unknown or revoked',
    });
  });

  it('refuses a key with no services enabled with 401 invalid_api_key on every v2 endpoint', async () => {
    const key = await h.createKey(owner.projectId, []);
    await expectEveryOperationRefused(`Bearer ${key.token}`, {
      status: 401,
      code: 'invalid_api_key',
      message: 'API key has no services enabled',
    });
  });

  it('refuses a key without the webhooks service with 403 service_not_enabled on every v2 endpoint', async () => {
    const key = await h.createKey(owner.projectId, ['verification']);
    await expectEveryOperationRefused(`Bearer ${key.token}`, {
      status: 403,
      code: 'service_not_enabled',
      message: 'the webhooks service is not enabled on this API key',
    });
  });

  it('accepts a key that has the webhooks service among others', async () => {
    const key = await h.createKey(owner.projectId, ['verification', 'webhooks']);
    const response = await h.request('GET', `${BASE}/webhooks/${target.webhookId}`, { token: key.token });
    expect(response.status).toBe(200);
    expect(response.body.data.id).toBe(target.webhookId);
  });
});

describe('project isolation', () => {
  it("refuses another project's key with 403 forbidden on every endpoint of a webhook, changing nothing", async () => {
    const stranger = await h.createKey();
    const before = await snapshot();
    for (const operation of OPERATIONS.filter((op) => op.scoped)) {
      const response = await call(operation, `Bearer ${stranger.token}`, stranger);
      expect({ operation: operation.name, status: response.status, error: response.body?.error }).toEqual({
        operation: operation.name,
        status: 403,
        error: { code: 'forbidden', message: `webhook ${target.webhookId} belongs to another project` },
      });
    }
    expect(await snapshot()).toEqual(before);
    const stillThere = await h.request('GET', `${BASE}/webhooks/${target.webhookId}/deliveries/${target.deliveryId}`, {
      token: owner.token,
    });
    expect(stillThere.body.data).toMatchObject({ status: 'failed', last_status_code: 503 });
  });

  it("does not list another project's webhooks nor let a key attach another project's API key", async () => {
    const stranger = await h.createKey();
    const list = await h.request('GET', `${BASE}/webhooks`, { token: stranger.token });
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);

    const before = await h.db.$count(webhooks);
    const attach = await h.request('POST', `${BASE}/webhooks`, {
      token: stranger.token,
      body: { api_key_id: owner.id, url: 'https://stranger.example.com/', events: ['docauth.completed'] },
    });
    expect(attach.status).toBe(400);
    expect(attach.body.error.message).toBe('api_key_id: must be an active API key of your project');
    expect(await h.db.$count(webhooks)).toBe(before);
  });

  it("answers 404 when another project's delivery id is used under the caller's own webhook", async () => {
    const stranger = await h.createKey();
    const own = await h.request('POST', `${BASE}/webhooks`, {
      token: stranger.token,
      body: { api_key_id: stranger.id, url: 'https://stranger.example.com/', events: ['docauth.completed'] },
    });
    const before = await snapshot();
    const operations = [['GET', ''], ['GET', '/attempts'], ['POST', '/retry']] as const;
    for (const [method, suffix] of operations) {
      const response = await h.request(
        method,
        `${BASE}/webhooks/${own.body.data.id}/deliveries/${target.deliveryId}${suffix}`,
        { token: stranger.token },
      );
      expect({ suffix, status: response.status, code: response.body.error.code }).toEqual({
        suffix,
        status: 404,
        code: 'not_found',
      });
    }
    expect(await snapshot()).toEqual(before);
  });
});

describe('API key storage', () => {
  it('stores only the SHA-256 of the secret part: neither the token nor the secret appears in any column', async () => {
    const key = await h.createKey();
    const [, secret] = /^sk_[0-9a-z]{26}_([A-Za-z0-9_-]{43})$/.exec(key.token) ?? [];
    if (!secret) throw new Error(`unexpected token shape: ${key.token}`);
    const rows = await queryRows(h.db, sql`select * from api_keys where id = ${key.id}`);
    expect(rows).toHaveLength(1);
    const stored = JSON.stringify(rows[0]);
    expect(stored).not.toContain(key.token);
    expect(stored).not.toContain(secret);
    const [row] = await h.db.select().from(apiKeys).where(eq(apiKeys.id, key.id));
    expect(row?.tokenHash).toBe(sha256Hex(secret));
    expect(row?.tokenHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('never writes a bearer token into the logs', async () => {
    await h.request('GET', `${BASE}/webhooks`, { token: owner.token });
    expect(h.logs.length).toBeGreaterThan(0);
    expect(h.logs.join('\n')).not.toContain(owner.token);
  });
});
