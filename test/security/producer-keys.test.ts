import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.ts';
import { parseConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { revokeApiKey } from '../../src/db/queries/api-keys.ts';
import { apiKeys, deliveries, events } from '../../src/db/schema.ts';
import { docauthData, startHarness, type Harness } from '../support/harness.ts';

/*
 * Finding: one global producer token published events for every project. Producers now hold
 * keys of one project (an API key with the events service); the global token is an operator
 * option, off unless EVENT_PRODUCER_TOKEN is set.
 */

const DOOR = '/internal/v1/events';
const WEBHOOKS = '/api-gateway/v2/webhooks';

let h: Harness;
let acme: { id: string; projectId: string; token: string };
let globex: { id: string; projectId: string; token: string };

beforeAll(async () => {
  h = await startHarness();
  acme = await h.createKey('acme-producers', ['events']);
  globex = await h.createKey('globex-producers', ['webhooks']);
  // A webhook of globex, which acme's producer key must never reach.
  const created = await h.request('POST', WEBHOOKS, {
    token: globex.token,
    body: { api_key_id: globex.id, url: 'https://example.com/hooks', events: ['docauth.completed'] },
  });
  expect(created.status).toBe(201);
});
afterAll(() => h?.stop());

const publish = (token: string, projectId: string) =>
  h.request('POST', DOOR, { token, body: { project_id: projectId, event: 'docauth.completed', data: docauthData() } });

describe('a producer key', () => {
  it('publishes for its own project', async () => {
    const response = await publish(acme.token, acme.projectId);
    expect(response.status).toBe(202);
    const [stored] = await h.db.select().from(events).where(eq(events.id, response.body.data.event_id));
    expect(stored?.projectId).toBe(acme.projectId);
  });

  it("is refused with 403 forbidden for another project's id, and nothing is stored", async () => {
    const [eventsBefore, deliveriesBefore] = [await h.db.$count(events), await h.db.$count(deliveries)];
    const response = await publish(acme.token, globex.projectId);
    expect(response.status).toBe(403);
    expect(response.body).toEqual({
      error: { code: 'forbidden', message: `project_id: this producer key publishes for project ${acme.projectId} only` },
      meta: { request_id: response.headers.get('X-Request-Id') },
    });
    expect(await h.db.$count(events)).toBe(eventsBefore);
    expect(await h.db.$count(deliveries)).toBe(deliveriesBefore);
    expect(await h.db.$count(events, eq(events.projectId, globex.projectId))).toBe(0);
  });

  it('is stored as a hash only, and stops working once revoked', async () => {
    const key = await h.createKey('initech', ['events']);
    const [row] = await h.db.select().from(apiKeys).where(eq(apiKeys.id, key.id));
    // The token is `sk_<key id>_<secret>`; the secret (base64url) may itself hold underscores.
    const secret = key.token.slice(`sk_${key.id.slice('key_'.length)}_`.length);
    expect(secret.length).toBeGreaterThan(20);
    expect(JSON.stringify(row)).not.toContain(secret);
    expect((await publish(key.token, key.projectId)).status).toBe(202);
    await revokeApiKey(h.db, key.id);
    const refused = await publish(key.token, key.projectId);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('invalid_api_key');
  });

  it('needs the events service: a webhooks key cannot publish, and a producer key cannot manage webhooks', async () => {
    const webhooksOnly = await publish(globex.token, globex.projectId);
    expect(webhooksOnly.status).toBe(403);
    expect(webhooksOnly.body.error.code).toBe('service_not_enabled');
    const manage = await h.request('GET', WEBHOOKS, { token: acme.token });
    expect(manage.status).toBe(403);
    expect(manage.body.error.code).toBe('service_not_enabled');
  });
});

describe('the global producer token', () => {
  it('is off unless EVENT_PRODUCER_TOKEN is set', async () => {
    expect(parseConfig({}).eventProducerToken).toBeUndefined();
    // The service as the default configuration assembles it: no operator token.
    const app = createApp({
      db: h.db,
      temporal: h.client,
      scheduler: h.scheduler,
      secretBox: h.secretBox,
      producerToken: parseConfig({}).eventProducerToken,
      admission: parseConfig({}).admission,
      logger: createLogger('silent'),
      metrics: h.metrics,
    });
    const response = await app.request(DOOR, {
      method: 'POST',
      headers: { Authorization: `Bearer ${h.producerToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ project_id: globex.projectId, event: 'docauth.completed', data: docauthData() }),
    });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
  });

  it('publishes for any project when the operator sets it', async () => {
    expect((await publish(h.producerToken, globex.projectId)).status).toBe(202);
  });
});
