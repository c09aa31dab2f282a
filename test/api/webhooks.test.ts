import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { webhooks } from '../../src/db/schema.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { openWebhookSigningSecrets } from '../../src/db/sealing.ts';
import { eraseExpiredPreviousSecrets } from '../../src/db/queries/webhooks.ts';

const BASE = '/api-gateway/v2';
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let h: Harness;
let key: { id: string; projectId: string; token: string };

const createBody = (overrides: Record<string, unknown> = {}) => ({
  api_key_id: key.id,
  url: 'https://example.com/hooks',
  events: ['docauth.completed'],
  headers: { 'X-Customer-Tag': 'prod' },
  ...overrides,
});

async function createWebhook(overrides: Record<string, unknown> = {}) {
  const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: createBody(overrides) });
  expect(response.status).toBe(201);
  return response.body.data as Record<string, any>;
}

beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
});
afterAll(() => h.stop());

describe('POST /webhooks', () => {
  it('creates an active webhook and shows the secret once, with every field of spec 2.1', async () => {
    const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: createBody() });
    expect(response.status).toBe(201);
    const { data, message, meta } = response.body;
    expect(Object.keys(data).sort()).toEqual(
      [
        'api_key_id', 'created_at', 'events', 'failure_count', 'headers', 'id', 'project_id', 'retry_config',
        'secret', 'status', 'success_count', 'updated_at', 'url', 'circuit_state', 'consecutive_failures', 'standard_webhooks',
      ].sort(),
    );
    expect(data.id).toMatch(/^wh_[0-9a-z]{26}$/);
    expect(data).toMatchObject({
      api_key_id: key.id,
      project_id: key.projectId,
      url: 'https://example.com/hooks',
      events: ['docauth.completed'],
      status: 'active',
      headers: { 'X-Customer-Tag': 'prod' },
      success_count: 0,
      failure_count: 0,
      retry_config: { max_retries: 5, initial_delay: 1, max_delay: 300, backoff_multiplier: 2 },
      circuit_state: 'closed',
      consecutive_failures: 0,
      standard_webhooks: false,
    });
    expect(data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(data.created_at).toMatch(ISO_UTC);
    expect(data.updated_at).toMatch(ISO_UTC);
    expect(data.last_delivered_at).toBeUndefined();
    expect(message).toMatch(/shown only once/);
    expect(meta.request_id).toBe(response.headers.get('X-Request-Id'));
  });

  it('stores the secret only encrypted', async () => {
    const created = await createWebhook();
    const [row] = await h.db.select().from(webhooks).where(eq(webhooks.id, created.id));
    expect(row!.secretSealed).not.toContain(created.secret);
    expect(row!.secretSealed).toMatch(/^v1:[0-9a-f]{8}:/);
    expect(openWebhookSigningSecrets(h.secretBox, row!, new Date())).toEqual([created.secret]);
  });

  it.each([
    [{ url: 'http://example.com/hooks' }, 'url: must use https'],
    [{ url: 'not-a-url' }, 'url: must be an absolute URL'],
    [{ url: 'https://exa mple.com/' }, 'url: must not contain spaces or control characters'],
    [{ url: 'https://user:pw@example.com/' }, 'url: must not contain user-info'],
    [{ url: `https://example.com/${'a'.repeat(2048)}` }, 'url: must be at most 2048 characters'],
    [{ events: [] }, 'events: must list at least one event'],
    [{ events: ['docauth.started'] }, 'events.0: must be one of: docauth.completed'],
    [{ events: ['docauth.completed', 'docauth.completed'] }, 'events: must not repeat an event'],
    [{ headers: { 'X-Service-Signature': 'v1=forged' } }, 'headers.X-Service-Signature: is set by the service'],
    [{ headers: { 'content-type': 'text/plain' } }, 'headers.content-type: is set by the service'],
    [{ headers: { Host: 'evil' } }, 'headers.Host: is set by the service'],
    [{ headers: { 'User-Agent': 'acme-probe/2' } }, 'headers.User-Agent: is set by the service'],
    [{ headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } }, 'headers.traceparent: is set by the service'],
    [{ headers: { 'Bad Name': 'x' } }, 'headers.Bad Name: is not a valid header name'],
    [{ headers: { 'X-A': 'line\r\nInjected: 1' } }, 'headers.X-A: value contains a control character'],
    [{ headers: { 'X-A': 1 } }, 'headers.X-A: header values must be strings'],
    [{ headers: { 'X-A': '1', 'x-a': '2' } }, 'repeats a header name'],
    [{ headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) }, 'headers: must have at most 20 headers'],
    [{ headers: { 'X-Big': 'v'.repeat(9000) } }, 'headers: must total at most 8192 bytes'],
    [{ rate_limit: 0 }, 'rate_limit: must be at least 0.01 deliveries per second (one every 100 s)'],
    [{ rate_limit: 0.000001 }, 'rate_limit: must be at least 0.01 deliveries per second (one every 100 s)'],
    [{ rate_limit: 1001 }, 'rate_limit: must be at most 1000 deliveries per second'],
    [{ rate_limit: '5' }, 'rate_limit: must be a number of deliveries per second'],
    [{ extra: true }, 'unknown field: extra'],
    [{ api_key_id: undefined }, 'api_key_id: is required'],
    [{ url: undefined }, 'url: is required'],
  ])('refuses %j with 400 invalid_request naming the field and rule', async (overrides, expected) => {
    const before = await h.db.$count(webhooks);
    const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: createBody(overrides) });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
    expect(response.body.error.message).toContain(expected);
    expect(response.body.meta.request_id).toBeTruthy();
    expect(await h.db.$count(webhooks)).toBe(before);
  });

  it("refuses an api_key_id that is not an active key of the caller's project", async () => {
    const other = await h.createKey();
    for (const apiKeyId of [other.id, 'key_unknown']) {
      const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: createBody({ api_key_id: apiKeyId }) });
      expect(response.status).toBe(400);
      expect(response.body.error).toEqual({
        code: 'invalid_request',
        message: 'api_key_id: must be an active API key of your project',
      });
    }
  });

  it('refuses malformed JSON, a non-JSON content type and a body over 1 MiB', async () => {
    const malformed = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      rawBody: '{"url": ',
      headers: { 'Content-Type': 'application/json' },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toEqual({ code: 'invalid_request', message: 'body: is not valid JSON' });

    const text = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      rawBody: 'url=https://example.com',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(text.status).toBe(400);
    expect(text.body.error.message).toBe('Content-Type must be application/json');

    // Refused by the routes' own media-type check, which answered 500 internal_error.
    const created = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: createBody() });
    const rotate = `${BASE}/webhooks/${created.body.data.id}/rotate-secret`;
    for (const [path, contentType, rawBody] of [
      [`${BASE}/webhooks`, 'application/json;', JSON.stringify(createBody())],
      [`${BASE}/webhooks`, 'application/vnd_x+json', JSON.stringify(createBody())],
      [rotate, 'application/json; charset=utf-8;', '{}'],
      [rotate, 'application/x-www-form-urlencoded', ''],
    ] as const) {
      const refused = await h.request('POST', path, { token: key.token, rawBody, headers: { 'Content-Type': contentType } });
      expect(refused.status, `${contentType} ${JSON.stringify(rawBody)}`).toBe(400);
      expect(refused.body.error).toEqual({ code: 'invalid_request', message: 'Content-Type must be application/json' });
    }

    const huge = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      rawBody: JSON.stringify({ ...createBody(), pad: 'x'.repeat(1024 * 1024) }),
      headers: { 'Content-Type': 'application/json' },
    });
    expect(huge.status).toBe(400);
    expect(huge.body.error.message).toBe('body: must be at most 1048576 bytes');
  });
});

describe('GET /webhooks', () => {
  it('lists the project webhooks without headers, retry_config or secret', async () => {
    const project = await h.createKey();
    const first = await h.request('POST', `${BASE}/webhooks`, {
      token: project.token,
      body: { api_key_id: project.id, url: 'https://a.example.com/', events: ['docauth.completed'] },
    });
    await h.request('POST', `${BASE}/webhooks`, {
      token: project.token,
      body: { api_key_id: project.id, url: 'https://b.example.com/', events: ['docauth.completed'] },
    });
    const response = await h.request('GET', `${BASE}/webhooks`, { token: project.token });
    expect(response.status).toBe(200);
    expect(response.body.message).toBe('2 webhooks');
    expect(response.body.data.map((w: { url: string }) => w.url)).toEqual(['https://a.example.com/', 'https://b.example.com/']);
    for (const item of response.body.data) {
      expect(item).not.toHaveProperty('headers');
      expect(item).not.toHaveProperty('retry_config');
      expect(item).not.toHaveProperty('secret');
      expect(item.project_id).toBe(project.projectId);
    }
    expect(response.body.data[0].id).toBe(first.body.data.id);
  });
});

describe('GET /webhooks/{id}', () => {
  it('returns the full configuration without the secret', async () => {
    const created = await createWebhook();
    const response = await h.request('GET', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(response.status).toBe(200);
    const { secret: _secret, ...withoutSecret } = created;
    expect(response.body.data).toEqual(withoutSecret);
    expect(response.text).not.toContain(created.secret);
  });

  it('answers 404 for an unknown id and 403 for a webhook of another project', async () => {
    const missing = await h.request('GET', `${BASE}/webhooks/wh_nope`, { token: key.token });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    const other = await h.createKey();
    const foreign = await h.request('GET', `${BASE}/webhooks/${(await createWebhook()).id}`, { token: other.token });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.code).toBe('forbidden');
  });
});

describe('PATCH /webhooks/{id}', () => {
  it('updates url, events, headers and status, and bumps updated_at', async () => {
    const created = await createWebhook();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const response = await h.request('PATCH', `${BASE}/webhooks/${created.id}`, {
      token: key.token,
      body: { url: 'https://new.example.com/in', headers: { 'X-New': '1' }, status: 'disabled' },
    });
    expect(response.status).toBe(200);
    expect(response.body.data).toMatchObject({
      id: created.id,
      url: 'https://new.example.com/in',
      headers: { 'X-New': '1' },
      status: 'disabled',
      events: ['docauth.completed'],
      created_at: created.created_at,
    });
    expect(response.body.data).not.toHaveProperty('secret');
    expect(Date.parse(response.body.data.updated_at)).toBeGreaterThan(Date.parse(created.updated_at));

    const reenabled = await h.request('PATCH', `${BASE}/webhooks/${created.id}`, { token: key.token, body: { status: 'active' } });
    expect(reenabled.body.data.status).toBe('active');
  });

  it('answers an empty body (every field is optional) with the webhook as it is, and writes nothing', async () => {
    const created = await createWebhook();
    const response = await h.request('PATCH', `${BASE}/webhooks/${created.id}`, { token: key.token, body: {} });
    expect(response.status).toBe(200);
    expect(response.body.data).toMatchObject({ id: created.id, url: created.url, status: created.status, updated_at: created.updated_at });
    const after = await h.request('GET', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(after.body.data.updated_at).toBe(created.updated_at);
  });

  it.each([
    [{ status: 'paused' }, 'status: must be active or disabled'],
    [{ url: 'http://example.com' }, 'url: must use https'],
    [{ api_key_id: 'key_x' }, 'unknown field: api_key_id'],
  ])('refuses %j with 400 and changes nothing', async (body, expected) => {
    const created = await createWebhook();
    const response = await h.request('PATCH', `${BASE}/webhooks/${created.id}`, { token: key.token, body });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
    expect(response.body.error.message).toContain(expected);
    const after = await h.request('GET', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(after.body.data.updated_at).toBe(created.updated_at);
  });
});

describe('POST /webhooks/{id}/rotate-secret', () => {
  it('returns a new secret once and replaces the stored one', async () => {
    const created = await createWebhook();
    const response = await h.request('POST', `${BASE}/webhooks/${created.id}/rotate-secret`, { token: key.token });
    expect(response.status).toBe(200);
    expect(response.body.data.secret).toMatch(/^whsec_/);
    expect(response.body.data.secret).not.toBe(created.secret);
    expect(response.body.message).toMatch(/shown only once/);
    const [row] = await h.db.select().from(webhooks).where(eq(webhooks.id, created.id));
    expect(openWebhookSigningSecrets(h.secretBox, row!, new Date())).toEqual([response.body.data.secret]);
    expect(response.body.data).not.toHaveProperty('previous_secret_expires_at');
  });

  it('takes an empty body sent as application/json (many clients set it on every request) as no body', async () => {
    const created = await createWebhook();
    const response = await h.request('POST', `${BASE}/webhooks/${created.id}/rotate-secret`, {
      token: key.token,
      rawBody: '',
      headers: { 'Content-Type': 'application/json', 'Content-Length': '0' },
    });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.data.secret).toMatch(/^whsec_/);
    expect(response.body.data).not.toHaveProperty('previous_secret_expires_at');
    const malformed = await h.request('POST', `${BASE}/webhooks/${created.id}/rotate-secret`, { token: key.token, rawBody: '{', headers: { 'Content-Type': 'application/json' } });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.message).toBe('body: is not valid JSON');
  });

  const rotate = (id: string, body?: unknown) => h.request('POST', `${BASE}/webhooks/${id}/rotate-secret`, { token: key.token, ...(body !== undefined && { body }) });
  const storedRow = async (id: string) => (await h.db.select().from(webhooks).where(eq(webhooks.id, id)))[0]!;

  it('keeps the replaced secret signing beside the new one for a grace period, shown on the webhook, sealed at rest', async () => {
    const created = await createWebhook();
    const before = Date.now();
    const response = await rotate(created.id, { grace_period: 86400 });
    expect(response.status).toBe(200);
    const { secret, previous_secret_expires_at: expiresAt } = response.body.data;
    expect(Date.parse(expiresAt) - before).toBeGreaterThanOrEqual(86_400_000);
    expect(Date.parse(expiresAt) - Date.now()).toBeLessThanOrEqual(86_400_000);
    expect(response.body.message).toContain(`Until ${expiresAt} each send is signed with the new and the previous secret`);

    const row = await storedRow(created.id);
    expect(openWebhookSigningSecrets(h.secretBox, row, new Date())).toEqual([secret, created.secret]);
    expect(openWebhookSigningSecrets(h.secretBox, row, new Date(Date.parse(expiresAt) + 1))).toEqual([secret]);
    expect(row.previousSecretSealed).not.toContain(created.secret.slice('whsec_'.length, 20));
    // Sealed for this webhook: the same value on another row does not open.
    const other = await createWebhook();
    await h.db.update(webhooks).set({ previousSecretSealed: row.previousSecretSealed, previousSecretExpiresAt: row.previousSecretExpiresAt }).where(eq(webhooks.id, other.id));
    expect(() => openWebhookSigningSecrets(h.secretBox, { ...row, id: other.id }, new Date())).toThrow(/does not open/);
    await h.db.update(webhooks).set({ previousSecretSealed: null, previousSecretExpiresAt: null }).where(eq(webhooks.id, other.id));

    const shown = await h.request('GET', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(shown.body.data.previous_secret_expires_at).toBe(expiresAt);
    const listed = await h.request('GET', `${BASE}/webhooks?limit=100`, { token: key.token });
    expect(listed.body.data.find((webhook: { id: string }) => webhook.id === created.id).previous_secret_expires_at).toBe(expiresAt);
  });

  it('a second rotation keeps only the secret it replaces; one without a grace period ends the previous secret at once', async () => {
    const created = await createWebhook();
    const first = (await rotate(created.id, { grace_period: 3600 })).body.data;
    const second = (await rotate(created.id, { grace_period: 60 })).body.data;
    expect(openWebhookSigningSecrets(h.secretBox, await storedRow(created.id), new Date())).toEqual([second.secret, first.secret]);
    expect(Date.parse(second.previous_secret_expires_at)).toBeLessThan(Date.parse(first.previous_secret_expires_at));

    const third = (await rotate(created.id)).body.data;
    const row = await storedRow(created.id);
    expect(openWebhookSigningSecrets(h.secretBox, row, new Date())).toEqual([third.secret]);
    expect(row.previousSecretSealed).toBeNull();
    const shown = await h.request('GET', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(shown.body.data).not.toHaveProperty('previous_secret_expires_at');
    // A grace period of 0 is the same as none.
    await rotate(created.id, { grace_period: 0 });
    expect((await storedRow(created.id)).previousSecretSealed).toBeNull();
  });

  it('erases a previous secret once its grace period has ended', async () => {
    const created = await createWebhook();
    await rotate(created.id, { grace_period: 1 });
    expect((await storedRow(created.id)).previousSecretSealed).not.toBeNull();
    expect(await eraseExpiredPreviousSecrets(h.db, new Date(), 100)).toBe(0);
    const later = new Date(Date.now() + 1_001);
    expect(await eraseExpiredPreviousSecrets(h.db, later, 100)).toBeGreaterThanOrEqual(1);
    const row = await storedRow(created.id);
    expect(row.previousSecretSealed).toBeNull();
    expect(row.previousSecretExpiresAt).toBeNull();
  });

  it.each([
    [{ grace_period: 604801 }, 'grace_period: must be at most 604800 seconds (7 days)'],
    [{ grace_period: -1 }, 'grace_period: must be at least 0 seconds'],
    [{ grace_period: 1.5 }, 'grace_period: must be a whole number of seconds'],
    [{ grace_period: '1h' }, 'grace_period: must be a number of seconds'],
    [{ grace: 60 }, 'unknown field: grace'],
  ])('refuses %j with a clear error and changes nothing', async (body, expected) => {
    const created = await createWebhook();
    const response = await rotate(created.id, body);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_request' });
    expect(response.body.error.message).toContain(expected);
    const row = await storedRow(created.id);
    expect(openWebhookSigningSecrets(h.secretBox, row, new Date())).toEqual([created.secret]);
  });

  it('answers 404 for an unknown webhook, body or not', async () => {
    expect((await rotate('wh_00000000000000000000000000', { grace_period: 60 })).status).toBe(404);
    expect((await rotate('wh_00000000000000000000000000')).status).toBe(404);
  });
});

describe('standard_webhooks', () => {
  it('is off by default, set on create, changed by PATCH, and refuses what is not a boolean', async () => {
    const created = await createWebhook({ standard_webhooks: true });
    expect(created.standard_webhooks).toBe(true);
    const off = await h.request('PATCH', `${BASE}/webhooks/${created.id}`, { token: key.token, body: { standard_webhooks: false } });
    expect(off.status).toBe(200);
    expect(off.body.data.standard_webhooks).toBe(false);
    const bad = await h.request('PATCH', `${BASE}/webhooks/${created.id}`, { token: key.token, body: { standard_webhooks: 'yes' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toBe('standard_webhooks: must be true or false');
  });

  it.each(['webhook-id', 'Webhook-Signature', 'WEBHOOK-TIMESTAMP'])('refuses the custom header %s, which the service sets itself', async (name) => {
    const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: createBody({ headers: { [name]: 'x' } }) });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
  });
});

describe('DELETE /webhooks/{id}', () => {
  it('answers 204 with no body, then the webhook is gone', async () => {
    const created = await createWebhook();
    const response = await h.request('DELETE', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(response.status).toBe(204);
    expect(response.text).toBe('');
    const after = await h.request('GET', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(after.status).toBe(404);
    const again = await h.request('DELETE', `${BASE}/webhooks/${created.id}`, { token: key.token });
    expect(again.status).toBe(404);
  });
});
