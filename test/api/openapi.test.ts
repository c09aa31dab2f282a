import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { OPENAPI_PATH } from '../../src/app.ts';
import { deliveries, deliveryAttempts } from '../../src/db/schema.ts';
import { newId } from '../../src/ids.ts';
import { docauthData, startHarness, type Harness, type TestResponse } from '../support/harness.ts';

const BASE = '/api-gateway/v2';
const REDOCLY = path.resolve('node_modules/.bin/redocly');
const runFile = promisify(execFile);

/** The part of JSON Schema the service's OpenAPI document uses. */
interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  additionalProperties?: boolean | JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  format?: string;
  [keyword: string]: unknown;
}

interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: { schemas: Record<string, JsonSchema>; securitySchemes?: Record<string, unknown> };
  security?: Record<string, string[]>[];
}

interface OpenApiLink {
  operationId: string;
  parameters: Record<string, string>;
}

interface OpenApiOperation {
  operationId?: string;
  parameters?: { name: string; in: string; required?: boolean }[];
  security?: Record<string, string[]>[];
  responses: Record<string, { description: string; content?: Record<string, { schema: JsonSchema }>; links?: Record<string, OpenApiLink> }>;
}

/** Keywords that only describe; the validator may skip them. */
const ANNOTATIONS = new Set(['description', 'example', 'examples', 'default', 'title', 'deprecated']);
const ASSERTIONS = new Set([
  '$ref', 'type', 'properties', 'required', 'items', 'enum', 'additionalProperties', 'anyOf', 'oneOf', 'allOf', 'format',
]);
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/;

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'array':
      return Array.isArray(value);
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'null':
      return value === null;
    default:
      return typeof value === type;
  }
}

/**
 * Checks `value` against `schema` (resolving `$ref`s in the document's components) and
 * returns one line per problem, empty when it conforms. Throws on a keyword it does not
 * implement, so a schema it cannot check never passes silently.
 */
function validate(schema: JsonSchema, value: unknown, document: OpenApiDocument, at = '$'): string[] {
  for (const keyword of Object.keys(schema)) {
    if (!ASSERTIONS.has(keyword) && !ANNOTATIONS.has(keyword)) throw new Error(`${at}: unsupported keyword ${keyword}`);
  }
  if (schema.$ref) {
    const name = /^#\/components\/schemas\/(.+)$/.exec(schema.$ref)?.[1];
    const target = name === undefined ? undefined : document.components.schemas[name];
    if (!target) return [`${at}: unresolvable $ref ${schema.$ref}`];
    return validate(target, value, document, at);
  }
  const problems: string[] = [];
  for (const part of schema.allOf ?? []) problems.push(...validate(part, value, document, at));
  if (schema.anyOf && !schema.anyOf.some((part) => validate(part, value, document, at).length === 0)) {
    problems.push(`${at}: matches none of anyOf`);
  }
  if (schema.oneOf) {
    const matches = schema.oneOf.filter((part) => validate(part, value, document, at).length === 0).length;
    if (matches !== 1) problems.push(`${at}: matches ${matches} of oneOf, not exactly one`);
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((type) => hasType(value, type))) {
      return [...problems, `${at}: expected ${types.join(' or ')}, got ${JSON.stringify(value)}`];
    }
  }
  if (schema.enum && !schema.enum.some((allowed) => allowed === value)) {
    problems.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if (schema.format === 'date-time' && typeof value === 'string' && !ISO_DATE_TIME.test(value)) {
    problems.push(`${at}: ${value} is not a date-time`);
  }
  if (hasType(value, 'object')) {
    const object = value as Record<string, unknown>;
    for (const name of schema.required ?? []) {
      if (!(name in object)) problems.push(`${at}.${name}: is required`);
    }
    for (const [name, field] of Object.entries(object)) {
      const declared = schema.properties?.[name];
      if (declared) problems.push(...validate(declared, field, document, `${at}.${name}`));
      else if (schema.additionalProperties === false) problems.push(`${at}.${name}: is not allowed`);
      else if (typeof schema.additionalProperties === 'object') {
        problems.push(...validate(schema.additionalProperties, field, document, `${at}.${name}`));
      }
    }
  }
  if (Array.isArray(value) && schema.items) {
    value.forEach((item, index) => problems.push(...validate(schema.items!, item, document, `${at}[${index}]`)));
  }
  return problems;
}

let h: Harness;
let key: Awaited<ReturnType<Harness['createKey']>>;
let doc: OpenApiDocument;

/** The response schema the document declares for `method path` answering `status` with JSON. */
function responseSchema(method: string, path: string, status: number): JsonSchema {
  const operation = doc.paths[path]?.[method.toLowerCase()];
  if (!operation) throw new Error(`${method} ${path} is not documented`);
  const schema = operation.responses[String(status)]?.content?.['application/json']?.schema;
  if (!schema) throw new Error(`${method} ${path} does not document a JSON ${status} response`);
  return schema;
}

beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
  const response = await h.request('GET', OPENAPI_PATH);
  expect(response.status).toBe(200);
  doc = response.body as OpenApiDocument;
});
afterAll(() => h.stop());

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 and documents exactly the v2 operations, delivery inspection, bulk operations, test events, portal links and the producer door', () => {
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.fromEntries(
      Object.entries(doc.paths).map(([path, methods]) => [path, Object.keys(methods).sort()]),
    );
    expect(operations).toEqual({
      [`${BASE}/webhooks`]: ['get', 'post'],
      [`${BASE}/webhooks/{id}`]: ['delete', 'get', 'patch'],
      [`${BASE}/webhooks/{id}/rotate-secret`]: ['post'],
      [`${BASE}/webhooks/{id}/deliveries`]: ['get'],
      [`${BASE}/webhooks/{id}/deliveries/{delivery_id}`]: ['get'],
      [`${BASE}/webhooks/{id}/deliveries/{delivery_id}/attempts`]: ['get'],
      [`${BASE}/webhooks/{id}/deliveries/{delivery_id}/retry`]: ['post'],
      [`${BASE}/webhooks/{id}/deliveries/retry`]: ['post'],
      [`${BASE}/webhooks/{id}/operations/{operation_id}`]: ['delete', 'get'],
      [`${BASE}/webhooks/{id}/test-events`]: ['post'],
      [`${BASE}/portal/sessions`]: ['post'],
      '/internal/v1/events': ['post'],
    });
  });

  it('declares every path parameter of every operation, as required', () => {
    for (const [path, methods] of Object.entries(doc.paths)) {
      const placeholders = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]);
      for (const [method, operation] of Object.entries(methods)) {
        const declared = (operation.parameters ?? []).filter((parameter) => parameter.in === 'path');
        expect({ operation: `${method} ${path}`, names: declared.map((p) => p.name) }).toEqual({
          operation: `${method} ${path}`,
          names: placeholders,
        });
        expect(declared.every((parameter) => parameter.required === true)).toBe(true);
      }
    }
  });

  it('requires a bearer API token on the v2 operations and the producer token on the producer door', () => {
    expect(doc.components.securitySchemes).toMatchObject({
      bearerAuth: { type: 'http', scheme: 'bearer' },
      producerToken: { type: 'http', scheme: 'bearer' },
    });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const effective = operation.security ?? doc.security;
        const expected = path.startsWith('/internal/') ? [{ producerToken: [] }] : [{ bearerAuth: [] }];
        expect({ operation: `${method} ${path}`, security: effective }).toEqual({
          operation: `${method} ${path}`,
          security: expected,
        });
      }
    }
  });

  it('documents 401 on every operation and 204 without a body for delete', () => {
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        expect({ operation: `${method} ${path}`, has401: '401' in operation.responses }).toEqual({
          operation: `${method} ${path}`,
          has401: true,
        });
      }
    }
    expect(doc.paths[`${BASE}/webhooks/{id}`]?.delete?.responses['204']).toEqual({ description: 'Deleted' });
  });
});

/** Every documented operation with its method and path template. */
function operations(): { method: string; path: string; operation: OpenApiOperation }[] {
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ method, path, operation })),
  );
}

/** The value of a link's runtime expression for one exchange: `$request.path.x` or `$response.body#/json/pointer`. */
function resolveExpression(expression: string, requestPath: Record<string, string>, responseBody: unknown): string {
  const fromPath = /^\$request\.path\.(\w+)$/.exec(expression);
  if (fromPath) return requestPath[fromPath[1]!]!;
  const fromBody = /^\$response\.body#(\/.*)$/.exec(expression);
  if (!fromBody) throw new Error(`unsupported runtime expression ${expression}`);
  let value: unknown = responseBody;
  for (const token of fromBody[1]!.slice(1).split('/')) value = (value as Record<string, unknown>)[token.replaceAll('~1', '/').replaceAll('~0', '~')];
  if (typeof value !== 'string') throw new Error(`${expression} resolves to ${JSON.stringify(value)}`);
  return value;
}

describe('operation ids and links', () => {
  it('names every operation with a unique operationId', () => {
    const ids = operations().map(({ operation }) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('links each id a response carries to the operations that take it, with exactly their path parameters', () => {
    const byId = new Map(operations().map((entry) => [entry.operation.operationId, entry]));
    const linked = new Set<string>();
    for (const { operation } of operations()) {
      for (const response of Object.values(operation.responses)) {
        for (const link of Object.values(response.links ?? {})) {
          const target = byId.get(link.operationId);
          expect(target, link.operationId).toBeDefined();
          const pathParameters = (target!.operation.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name).sort();
          expect(Object.keys(link.parameters).sort()).toEqual(pathParameters);
          for (const expression of Object.values(link.parameters)) expect(expression).toMatch(/^\$(request\.path\.\w+|response\.body#\/[\w/]+)$/);
          linked.add(link.operationId);
        }
      }
    }
    const idBased = operations().filter(({ path }) => path.includes('{')).map(({ operation }) => operation.operationId);
    expect([...linked].sort()).toEqual(idBased.sort());
  });

  it('walks from a created webhook, a listed delivery and a started operation to every id-based operation', async () => {
    const created = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      body: { api_key_id: key.id, url: 'https://example.com/linked', events: ['docauth.completed'] },
    });
    expect(created.status).toBe(201);
    await h.publish({ project_id: key.projectId, event: 'docauth.completed', data: docauthData() });
    const byId = new Map(operations().map((entry) => [entry.operation.operationId, entry]));
    // The update leaves the webhook active, so the test event the walk reaches is accepted.
    const bodies: Record<string, unknown> = { updateWebhook: { headers: { 'X-Walked': 'yes' } }, retryDeliveries: {} };
    const reached: Record<string, number> = {};
    // Breadth-first over the links, deleting last so the other operations find the webhook.
    const queue: { from: string; requestPath: Record<string, string>; response: TestResponse }[] = [
      { from: 'createWebhook', requestPath: {}, response: created },
    ];
    const deferred: typeof queue = [];
    while (queue.length > 0) {
      const { from, requestPath, response } = queue.shift()!;
      const { operation } = byId.get(from)!;
      for (const link of Object.values(operation.responses[String(response.status)]?.links ?? {})) {
        if (reached[link.operationId] !== undefined) continue;
        const target = byId.get(link.operationId)!;
        const parameters = Object.fromEntries(
          Object.entries(link.parameters).map(([name, expression]) => [name, resolveExpression(expression, requestPath, response.body)]),
        );
        const url = target.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(parameters[name]!));
        if (link.operationId === 'deleteWebhook') {
          deferred.push({ from: link.operationId, requestPath: parameters, response: { status: 0, headers: new Headers(), body: url, text: '' } });
          reached[link.operationId] = 0;
          continue;
        }
        const answer = await h.request(target.method.toUpperCase(), url, {
          token: key.token,
          ...(bodies[link.operationId] !== undefined ? { body: bodies[link.operationId] } : {}),
        });
        reached[link.operationId] = answer.status;
        queue.push({ from: link.operationId, requestPath: parameters, response: answer });
      }
    }
    for (const { response } of deferred) {
      reached['deleteWebhook'] = (await h.request('DELETE', response.body as string, { token: key.token })).status;
    }
    const idBased = operations().filter(({ path }) => path.includes('{')).map(({ operation }) => operation.operationId!);
    expect(Object.keys(reached).sort()).toEqual(idBased.sort());
    // Every linked call found its resource; a retry of a delivery still pending is a documented 409.
    for (const [operationId, status] of Object.entries(reached)) {
      expect(status < 300 || (operationId === 'retryDelivery' && status === 409), `${operationId} answered ${status}`).toBe(true);
    }
  });
});

describe('lint', () => {
  it('passes Redocly CLI with the recommended rules (redocly.yaml): no error, no warning', async () => {
    const served = await h.app.request(`https://webhooks.internal${OPENAPI_PATH}`);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'openapi-lint-'));
    try {
      const file = path.join(dir, 'openapi.json');
      await writeFile(file, await served.text());
      const { stdout } = await runFile(REDOCLY, ['lint', file, '--format=json', '--config', 'redocly.yaml'], {
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      }).catch(
        (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
      );
      const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string }[] };
      expect(report.problems.map((problem) => `${problem.ruleId}: ${problem.message}`)).toEqual([]);
      expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('request constraints the server enforces, stated in the document', () => {
  const component = (name: string) => doc.components.schemas[name]!;

  it('events are unique, headers are bounded and named by the header grammar', async () => {
    const events = component('CreateWebhook').properties!['events']!;
    expect(events).toMatchObject({ type: 'array', minItems: 1, uniqueItems: true });
    const headers = component('CreateWebhook').properties!['headers']!;
    expect(headers).toMatchObject({ type: 'object', maxProperties: 20, propertyNames: { pattern: expect.any(String) } });
    const url = component('CreateWebhook').properties!['url']!;
    expect(url).toMatchObject({ format: 'uri', maxLength: 2048 });
    const urlPattern = new RegExp(url['pattern'] as string);
    expect(['https://example.com/x', 'https://[::1]:8443/h?x=1', 'https://example.com/a@b'].every((value) => urlPattern.test(value))).toBe(true);
    expect(['http://example.com', 'https://user@example.com', 'https://example.com/a b'].some((value) => urlPattern.test(value))).toBe(false);
    // The server checks the same grammar: an internationalized host only in its Punycode form.
    expect([urlPattern.test('https://xn--bcher-kva.example/'), urlPattern.test('https://bücher.example/')]).toEqual([true, false]);
    const reservedName = new RegExp((headers['propertyNames'] as { not: { pattern: string } }).not.pattern);
    expect(['Host', 'content-TYPE', 'X-Service-Signature', 'User-Agent', 'X-Customer-Tag'].map((name) => reservedName.test(name))).toEqual([true, true, true, true, false]);

    // And the server refuses what the document rules out.
    const refused = [
      { api_key_id: key.id, url: 'https://example.com/x', events: ['docauth.completed', 'docauth.completed'] },
      { api_key_id: key.id, url: 'https://example.com/x', events: ['docauth.completed'], headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) },
      { api_key_id: key.id, url: 'https://example.com/x', events: ['docauth.completed'], headers: { 'Bad Name': 'v' } },
      { api_key_id: key.id, url: 'https://example.com/x', events: ['docauth.completed'], headers: { HOST: 'v' } },
      { api_key_id: key.id, url: 'https://bücher.example/', events: ['docauth.completed'] },
    ];
    for (const body of refused) {
      const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
  });
});

describe('the schema check used below', () => {
  const sample = {
    data: { id: 'dlv_1', webhook_config_id: 'wh_1', event: 'docauth.completed', status: 'pending', attempt_count: 0, created_at: '2026-11-22T10:00:00.000Z' },
    message: 'Delivery retrieved',
    meta: { request_id: 'req_1' },
  };
  const path = `${BASE}/webhooks/{id}/deliveries/{delivery_id}`;

  it('accepts a conforming delivery body', () => {
    expect(validate(responseSchema('GET', path, 200), sample, doc)).toEqual([]);
  });

  it('reports a missing field, a wrong type, an unknown field, a bad enum value and a bad date-time', () => {
    const { id: _id, ...withoutId } = sample.data;
    const broken = {
      ...sample,
      data: { ...withoutId, attempt_count: 1.5, status: 'lost', created_at: 'yesterday', extra: true },
      meta: {},
    };
    expect(validate(responseSchema('GET', path, 200), broken, doc)).toEqual([
      '$.data.id: is required',
      '$.data.status: "lost" is not one of ["pending","processing","delivered","failed","dead_letter"]',
      '$.data.attempt_count: expected integer, got 1.5',
      '$.data.created_at: yesterday is not a date-time',
      '$.data.extra: is not allowed',
      '$.meta.request_id: is required',
    ]);
  });

  it('checks array items, anyOf, oneOf and refuses a keyword it does not implement', () => {
    const stringOrNumber: JsonSchema = { anyOf: [{ type: 'string' }, { type: 'number' }] };
    expect(validate({ type: 'array', items: stringOrNumber }, ['a', 1, true], doc)).toEqual(['$[2]: matches none of anyOf']);
    expect(validate({ oneOf: [{ type: 'number' }, { type: 'integer' }] }, 3, doc)).toEqual([
      '$: matches 2 of oneOf, not exactly one',
    ]);
    expect(validate({ $ref: '#/components/schemas/Nope' }, {}, doc)).toEqual(['$: unresolvable $ref #/components/schemas/Nope']);
    expect(() => validate({ type: 'string', pattern: '^a' }, 'b', doc)).toThrow('unsupported keyword pattern');
  });
});

describe('responses the app produces', () => {
  let webhookId: string;
  let samples: [string, string, TestResponse][];

  beforeAll(async () => {
    const stranger = await h.createKey();
    const created = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      body: { api_key_id: key.id, url: 'https://example.com/hooks', events: ['docauth.completed'], headers: { 'X-Tag': 'a' } },
    });
    webhookId = created.body.data.id;
    const published = [];
    for (let i = 0; i < 3; i += 1) {
      published.push((await h.publish({ project_id: key.projectId, event: 'docauth.completed', data: docauthData() })).body.data.delivery_ids[0] as string);
    }
    const [pendingId, failedId, deliveredId] = published as [string, string, string];
    await h.db
      .update(deliveries)
      .set({ status: 'failed', attemptCount: 1, lastError: 'HTTP 503', lastStatusCode: 503, nextRetryAt: new Date() })
      .where(eq(deliveries.id, failedId));
    await h.db
      .update(deliveries)
      .set({ status: 'delivered', attemptCount: 1, lastStatusCode: 200, deliveredAt: new Date() })
      .where(eq(deliveries.id, deliveredId));
    await h.db.insert(deliveryAttempts).values([
      { id: newId('attempt'), deliveryId: failedId, attemptNumber: 1, startedAt: new Date(), durationMs: 12, statusCode: 503, outcome: 'http_error', error: 'HTTP 503' },
    ]);

    const webhook = `${BASE}/webhooks/${webhookId}`;
    const template = `${BASE}/webhooks/{id}`;
    samples = [
      ['POST', `${BASE}/webhooks`, created],
      ['GET', `${BASE}/webhooks`, await h.request('GET', `${BASE}/webhooks`, { token: key.token })],
      ['GET', template, await h.request('GET', webhook, { token: key.token })],
      ['PATCH', template, await h.request('PATCH', webhook, { token: key.token, body: { status: 'disabled' } })],
      ['POST', `${template}/rotate-secret`, await h.request('POST', `${webhook}/rotate-secret`, { token: key.token })],
      ['GET', `${template}/deliveries`, await h.request('GET', `${webhook}/deliveries?limit=2`, { token: key.token })],
      ['GET', `${template}/deliveries/{delivery_id}`, await h.request('GET', `${webhook}/deliveries/${failedId}`, { token: key.token })],
      ['GET', `${template}/deliveries/{delivery_id}`, await h.request('GET', `${webhook}/deliveries/${deliveredId}`, { token: key.token })],
      ['GET', `${template}/deliveries/{delivery_id}/attempts`, await h.request('GET', `${webhook}/deliveries/${failedId}/attempts`, { token: key.token })],
      ['POST', `${template}/deliveries/{delivery_id}/retry`, await h.request('POST', `${webhook}/deliveries/${failedId}/retry`, { token: key.token })],
      ['POST', `${template}/deliveries/{delivery_id}/retry`, await h.request('POST', `${webhook}/deliveries/${pendingId}/retry`, { token: key.token })],
      ['POST', '/internal/v1/events', await h.publish({ project_id: key.projectId, event: 'docauth.completed', data: docauthData() })],
      ['POST', '/internal/v1/events', await h.publish({ project_id: key.projectId })],
      ['POST', '/internal/v1/events', await h.request('POST', '/internal/v1/events', { body: {} })],
      [
        'POST',
        '/internal/v1/events',
        await h.request('POST', '/internal/v1/events', {
          token: await h.producerKey(key.projectId),
          body: { project_id: stranger.projectId, event: 'docauth.completed', data: docauthData() },
        }),
      ],
      ['POST', `${BASE}/webhooks`, await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: {} })],
      ['GET', `${BASE}/webhooks`, await h.request('GET', `${BASE}/webhooks`)],
      ['GET', `${BASE}/webhooks`, await h.request('GET', `${BASE}/webhooks`, { token: (await h.createKey(key.projectId, ['verification'])).token })],
      ['GET', template, await h.request('GET', webhook, { token: stranger.token })],
      ['GET', template, await h.request('GET', `${BASE}/webhooks/wh_missing`, { token: key.token })],
      ['GET', `${template}/deliveries`, await h.request('GET', `${webhook}/deliveries?limit=0`, { token: key.token })],
    ];
  });

  it('covers success and error statuses of every documented JSON operation', () => {
    const covered = new Set(samples.map(([method, path, response]) => `${method} ${path} ${response.status}`));
    expect([...covered].sort()).toEqual(
      [
        `POST ${BASE}/webhooks 201`, `POST ${BASE}/webhooks 400`,
        `GET ${BASE}/webhooks 200`, `GET ${BASE}/webhooks 401`, `GET ${BASE}/webhooks 403`,
        `GET ${BASE}/webhooks/{id} 200`, `GET ${BASE}/webhooks/{id} 403`, `GET ${BASE}/webhooks/{id} 404`,
        `PATCH ${BASE}/webhooks/{id} 200`,
        `POST ${BASE}/webhooks/{id}/rotate-secret 200`,
        `GET ${BASE}/webhooks/{id}/deliveries 200`, `GET ${BASE}/webhooks/{id}/deliveries 400`,
        `GET ${BASE}/webhooks/{id}/deliveries/{delivery_id} 200`,
        `GET ${BASE}/webhooks/{id}/deliveries/{delivery_id}/attempts 200`,
        `POST ${BASE}/webhooks/{id}/deliveries/{delivery_id}/retry 202`,
        `POST ${BASE}/webhooks/{id}/deliveries/{delivery_id}/retry 409`,
        'POST /internal/v1/events 202', 'POST /internal/v1/events 400', 'POST /internal/v1/events 401',
        'POST /internal/v1/events 403',
      ].sort(),
    );
  });

  it('match the response schemas the document declares for them', () => {
    for (const [method, path, response] of samples) {
      const problems = validate(responseSchema(method, path, response.status), response.body, doc);
      expect({ response: `${method} ${path} ${response.status}`, problems }).toEqual({
        response: `${method} ${path} ${response.status}`,
        problems: [],
      });
    }
  });

  it('exercise the optional fields of a delivery, so the check covers them', () => {
    const fields = new Set(
      samples
        .filter(([, path]) => path.endsWith('/deliveries/{delivery_id}'))
        .flatMap(([, , response]) => Object.keys(response.body.data)),
    );
    expect([...fields].sort()).toEqual(
      ['attempt_count', 'created_at', 'delivered_at', 'event', 'id', 'last_error', 'last_status_code', 'next_retry_at', 'status', 'webhook_config_id'],
    );
  });
});

describe('GET /docs', () => {
  it('serves Swagger UI on the document from the project own assets, with nothing loaded from another origin', async () => {
    const response = await h.request('GET', '/docs');
    expect(response.status).toBe(200);
    expect(response.headers.get('Content-Type')).toMatch(/^text\/html/);
    expect(response.text).toMatch(/^<!doctype html>/i);
    const references = [...response.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(references.sort()).toEqual([OPENAPI_PATH, '/docs/assets/init.js', '/docs/assets/swagger-ui-bundle.js', '/docs/assets/swagger-ui.css'].sort());
    expect(response.text).not.toMatch(/<script>(?!<)/); // no inline script

    const init = await h.request('GET', '/docs/assets/init.js');
    expect(init.headers.get('Content-Type')).toMatch(/^text\/javascript/);
    const options = JSON.parse(/SwaggerUIBundle\((.*)\);/s.exec(init.text)![1]!);
    expect(options).toMatchObject({ url: OPENAPI_PATH, tryItOutEnabled: true, validatorUrl: null });

    const bundle = await h.app.request('/docs/assets/swagger-ui-bundle.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('Content-Type')).toMatch(/^text\/javascript/);
    expect(await bundle.text()).toContain('SwaggerUIBundle');
    const css = await h.app.request('/docs/assets/swagger-ui.css');
    expect(css.headers.get('Content-Type')).toMatch(/^text\/css/);

    for (const name of ['package.json', '..%2Fpackage.json', 'index.html', 'constructor', 'toString', '__proto__']) {
      expect((await h.request('GET', `/docs/assets/${name}`)).status).toBe(404);
    }
  });
});
