import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKeys, deliveries, events, webhooks } from '../../src/db/schema.ts';
import { startHarness, type Harness, type TestResponse } from '../support/harness.ts';

const BASE = '/api-gateway/v2';
/** Generated cases per property; 5 properties × 400 = 2,000 per run. */
const RUNS = 400;

let h: Harness;
let key: { id: string; projectId: string; token: string };
let webhookId: string;
let deliveryId: string;

beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
  const created = await h.request('POST', `${BASE}/webhooks`, {
    token: key.token,
    body: { api_key_id: key.id, url: 'https://example.com/in', events: ['docauth.completed'] },
  });
  webhookId = created.body.data.id;
  const published = await h.publish({
    project_id: key.projectId,
    event: 'docauth.completed',
    data: { request_id: 'r', result: 'pass', docauth_info: {}, processed_at: '2026-11-22T10:00:00Z', scores_applied: false },
  });
  deliveryId = published.body.data.delivery_ids[0];
});
afterAll(() => h.stop());

const hostileKey = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', ' ', '\u0000', 'a\nb', '𝔘𝔫𝔦');
/** Strings that can be put in a URL (encodeURIComponent refuses lone surrogates). */
const urlSafe = (value: string) => value.isWellFormed();
const hostileString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('\u0000', '\r\n', '%00', '../../etc/passwd', "' or 1=1 --", '<script>', 'https://', 'https://127.0.0.1/', 'x'.repeat(5000), '\uD800'),
);
const hostileValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    hostileString,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(hostileKey, fc.string()), tie('value'), { maxKeys: 5 }),
  ),
})).value;
/** Objects close to valid ones, with fields dropped, retyped, or hostile keys added. */
const nearlyValidWebhook = fc.record(
  {
    api_key_id: fc.oneof(fc.constant('KEY'), hostileValue),
    url: fc.oneof(fc.constant('https://example.com/x'), hostileValue),
    events: fc.oneof(fc.constant(['docauth.completed']), hostileValue),
    headers: fc.oneof(fc.dictionary(fc.oneof(hostileKey, fc.string()), fc.oneof(fc.string(), hostileValue), { maxKeys: 25 }), hostileValue),
    status: hostileValue,
    __proto__: hostileValue,
  },
  { requiredKeys: [] },
);
const deeplyNested = fc.integer({ min: 100, max: 5000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth));
const rawBody = fc.oneof(
  fc.json().map((json) => json),
  fc.string(),
  deeplyNested,
  hostileValue.map((value) => JSON.stringify(value) ?? 'undefined'),
  nearlyValidWebhook.map((value) => JSON.stringify(value).replace('"KEY"', JSON.stringify(key.id))),
  fc.constant('{"url":"https://a.example","url":"http://dup.example","events":["docauth.completed"]}'),
  fc.constant('{"__proto__":{"polluted":true},"events":["docauth.completed"]}'),
  fc.constant('{"api_key_id":"key_\\u0000","url":"https://a.example/","events":["docauth.completed"]}'),
  fc.constant('{"api_key_id":"KEY","url":"https://a.example/\\u0000x","events":["docauth.completed"]}').map((body) => body.replace('KEY', key.id)),
  fc.constant('{"api_key_id":"KEY","url":"https://a.example/\\ud800","events":["docauth.completed"]}').map((body) => body.replace('KEY', key.id)),
);

function expectV2Error(response: TestResponse): void {
  expect(response.status, response.text).toBeLessThan(500);
  if (response.status >= 400) {
    expect(Object.keys(response.body ?? {}).sort()).toEqual(['error', 'meta']);
    expect(typeof response.body.error.code).toBe('string');
    expect(typeof response.body.error.message).toBe('string');
    expect(response.body.meta.request_id).toBe(response.headers.get('X-Request-Id'));
  }
}

async function counts() {
  return {
    webhooks: await h.db.$count(webhooks),
    events: await h.db.$count(events),
    deliveries: await h.db.$count(deliveries),
    apiKeys: await h.db.$count(apiKeys),
  };
}

describe('hostile input never yields a 5xx or a partly written record', () => {
  it('POST /webhooks and PATCH /webhooks/{id} with random bodies and content types', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('POST', 'PATCH'),
        rawBody,
        fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', ''),
        async (method, body, contentType) => {
          const before = await counts();
          const path = method === 'POST' ? `${BASE}/webhooks` : `${BASE}/webhooks/${webhookId}`;
          const response = await h.request(method, path, {
            token: key.token,
            rawBody: body,
            headers: contentType ? { 'Content-Type': contentType } : {},
          });
          expectV2Error(response);
          const after = await counts();
          if (response.status >= 400) expect(after).toEqual(before);
          else if (method === 'POST') expect(after.webhooks).toBe(before.webhooks + 1);
          expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('the producer door with random bodies', async () => {
    const eventBody = fc.record(
      {
        id: hostileValue,
        project_id: fc.oneof(fc.constant(key.projectId), hostileValue),
        event: fc.oneof(fc.constant('docauth.completed'), hostileValue),
        occurred_at: hostileValue,
        data: fc.oneof(
          fc.record(
            {
              request_id: fc.oneof(fc.constant('r1'), hostileValue),
              result: fc.oneof(fc.constantFrom('pass', 'fail'), hostileValue),
              docauth_info: fc.oneof(fc.dictionary(fc.oneof(hostileKey, fc.constantFrom('first_name', 'birth_date')), hostileValue), hostileValue),
              processed_at: fc.oneof(fc.constant('2026-11-22T10:00:00Z'), hostileValue),
              scores_applied: fc.oneof(fc.boolean(), hostileValue),
            },
            { requiredKeys: [] },
          ),
          hostileValue,
        ),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(eventBody.map((value) => JSON.stringify(value)), rawBody), async (body) => {
        const before = await counts();
        const response = await h.request('POST', '/internal/v1/events', {
          token: h.producerToken,
          rawBody: body,
          headers: { 'Content-Type': 'application/json' },
        });
        expectV2Error(response);
        if (response.status >= 400) expect(await counts()).toEqual(before);
      }),
      { numRuns: RUNS },
    );
  });

  it('every endpoint with random path ids', async () => {
    const id = fc.oneof(hostileString.filter(urlSafe), fc.constantFrom(webhookId, deliveryId, 'wh_', 'dlv_', '%2e%2e', '%00', '..', '%E0%A4%A'));
    await fc.assert(
      fc.asyncProperty(id, id, fc.integer({ min: 0, max: 7 }), async (first, second, operation) => {
        const a = encodeURIComponent(first);
        const b = encodeURIComponent(second);
        const [method, path] = [
          ['GET', `${BASE}/webhooks/${a}`],
          ['PATCH', `${BASE}/webhooks/${a}`],
          ['DELETE', `${BASE}/webhooks/${a}`],
          ['POST', `${BASE}/webhooks/${a}/rotate-secret`],
          ['GET', `${BASE}/webhooks/${a}/deliveries`],
          ['GET', `${BASE}/webhooks/${a}/deliveries/${b}`],
          ['GET', `${BASE}/webhooks/${a}/deliveries/${b}/attempts`],
          ['POST', `${BASE}/webhooks/${a}/deliveries/${b}/retry`],
        ][operation]!;
        const guarded = method !== 'GET' && first === webhookId; // keep the fixture webhook and its secret
        if (guarded) return;
        const response = await h.request(method!, path!, { token: key.token, ...(method === 'PATCH' ? { body: { status: 'active' } } : {}) });
        expectV2Error(response);
      }),
      { numRuns: RUNS },
    );
  });

  it('the deliveries list with random query strings', async () => {
    const param = fc.constantFrom('limit', 'starting_after', 'status', 'event', 'limit[]', '__proto__', '');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(param, hostileString.filter(urlSafe)), { maxLength: 6 }), async (pairs) => {
        const query = pairs.map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`).join('&');
        const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries?${query}`, { token: key.token });
        expectV2Error(response);
        if (response.status === 200) expect(Array.isArray(response.body.data)).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it('random and hostile headers (Authorization, X-Request-Id, Content-Type, huge values)', async () => {
    const headerValue = fc.oneof(
      fc.string().filter((value) => /^[\t\x20-\x7e]*$/.test(value)),
      fc.constantFrom('Bearer', 'Bearer ', 'bearer x', 'Bearer sk_', `Bearer ${'a'.repeat(10_000)}`, 'Basic YTpi', 'Bearer  two  parts', `Bearer ${key.token.slice(0, -1)}x`),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.constantFrom('Authorization', 'X-Request-Id', 'Content-Type', 'Accept', 'Content-Length', 'X-Forwarded-For'), headerValue, { maxKeys: 4 }),
        fc.constantFrom(`${BASE}/webhooks`, `${BASE}/webhooks/${webhookId}`, '/internal/v1/events'),
        fc.constantFrom('GET', 'POST'),
        async (headers, path, method) => {
          if (headers['Content-Length']) delete headers['Content-Length'];
          const response = await h.request(method, path, { headers, ...(method === 'POST' ? { rawBody: '{}' } : {}) });
          expectV2Error(response);
          if (!headers.Authorization?.startsWith(`Bearer ${key.token}`) && path.startsWith(BASE)) {
            expect(response.status).toBeGreaterThanOrEqual(400);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('duplicate keys and prototype-pollution keys are handled as plain data', async () => {
    const before = await counts();
    const response = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      rawBody: `{"api_key_id":"${key.id}","url":"https://a.example/","events":["docauth.completed"],"headers":{"__proto__":"x","constructor":"y"}}`,
      headers: { 'Content-Type': 'application/json' },
    });
    expectV2Error(response);
    if (response.status === 201) {
      expect(response.body.data.headers).toEqual({ __proto__: 'x', constructor: 'y' });
      expect(Object.getPrototypeOf(response.body.data.headers)).toBe(Object.prototype);
      expect(await h.db.$count(webhooks)).toBe(before.webhooks + 1);
    }
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

describe('text Postgres cannot store is refused with a 400, not a 500', () => {
  it.each([
    ['a NUL in docauth_info', { first_name: 'A\u0000B' }],
    ['a lone surrogate in docauth_info', { last_name: 'x\uD800y' }],
  ])('the producer door refuses %s', async (_name, docauthInfo) => {
    const before = await counts();
    const response = await h.publish({
      project_id: key.projectId,
      event: 'docauth.completed',
      data: { request_id: 'r', result: 'pass', docauth_info: docauthInfo, processed_at: '2026-11-22T10:00:00Z', scores_applied: false },
    });
    expect(response.status).toBe(400);
    expect(response.body.error.message).toMatch(/^data\.docauth_info\.\w+: must be valid Unicode text without NUL characters$/);
    expect(await counts()).toEqual(before);
  });

  it('a webhook id or delivery id with a NUL is simply not found', async () => {
    const webhook = await h.request('GET', `${BASE}/webhooks/wh_%00`, { token: key.token });
    expect(webhook.status).toBe(404);
    const delivery = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/dlv_%00`, { token: key.token });
    expect(delivery.status).toBe(404);
  });
});
