import { sql } from 'drizzle-orm';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { waitFor } from '../support/wait.ts';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from '../delivery/support.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { peakConcurrency, type ReceiverBehaviour } from '../support/https-receiver.ts';

const MAX_IN_FLIGHT = 2;
const BREAKER_THRESHOLD = 3;

/** How each endpoint (the last path segment of its URL) answers. */
const endpoints = new Map<string, ReceiverBehaviour>();

const started = harnessWithReceiver({
  delivery: { timeoutMs: 20_000 },
  flow: { webhookMaxInFlight: MAX_IN_FLIGHT, breakerThreshold: BREAKER_THRESHOLD },
});
beforeAll(() => {
  started.receiver.behave((request, index) => (endpoints.get(request.path.split('/').pop()!) ?? (() => ({ status: 200 })))(request, index));
});
beforeEach(() => {
  endpoints.clear();
});

const requestsTo = (endpoint: string) => started.receiver.requests.filter((request) => request.path.endsWith(`/${endpoint}`));
const requestsFor = (deliveryId: string) => started.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);
const webhookOf = async (token: string, id: string) => (await started.harness.request('GET', `${BASE}/webhooks/${id}`, { token })).body.data;

describe('isolation', () => {
  it("holds a hanging endpoint to its places, delivers another project's events meanwhile, and spends no attempt on waiting", async () => {
    const { harness: h, receiver } = started;
    endpoints.set('hang', () => 'hang');
    const hanging = await createWebhookFor(h, `${receiver.url}/hang`);
    const healthy = await createWebhookFor(h, `${receiver.url}/ok`);
    const waiting: string[] = [];
    for (let i = 0; i < 6; i += 1) waiting.push(...(await publishFor(h, hanging.key.projectId)).delivery_ids);
    await waitFor('the hanging endpoint to hold its places', () => requestsTo('hang').length >= MAX_IN_FLIGHT, { intervalMs: 100 });

    const healthyIds: string[] = [];
    for (let i = 0; i < 5; i += 1) healthyIds.push(...(await publishFor(h, healthy.key.projectId)).delivery_ids);
    for (const id of healthyIds) await waitForDelivery(h, healthy.key.token, healthy.webhookId, id, (d) => d.status === 'delivered', 10_000);
    expect(requestsTo('hang')).toHaveLength(MAX_IN_FLIGHT);
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_send_waits_total\{reason="webhook_busy"\} \d+/);

    // The endpoint recovers: the waiting deliveries go out, never more than its places at once,
    // each in one attempt (waiting used none).
    endpoints.delete('hang');
    receiver.answerHanging(200);
    for (const id of waiting) {
      const delivered = await waitForDelivery(h, hanging.key.token, hanging.webhookId, id, (d) => d.status === 'delivered', 30_000);
      expect(delivered.attempt_count).toBe(1);
    }
    expect(peakConcurrency(requestsTo('hang'))).toBeLessThanOrEqual(MAX_IN_FLIGHT);
  }, 90_000);

  it('opens the circuit breaker after failures in a row, probes one attempt at a time, and closes it on a success', async () => {
    const { harness: h, receiver } = started;
    endpoints.set('down', () => ({ status: 500 }));
    const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/down`);
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) ids.push(...(await publishFor(h, key.projectId)).delivery_ids);
    await waitFor('the circuit to open', async () => (await webhookOf(key.token, webhookId)).circuit_state === 'open', { intervalMs: 100 });
    const opened = await webhookOf(key.token, webhookId);
    expect(opened).toMatchObject({ circuit_state: 'open', circuit_opened_at: expect.any(String), consecutive_failures: expect.any(Number) });
    expect(opened.consecutive_failures).toBeGreaterThanOrEqual(BREAKER_THRESHOLD);
    const openedAt = Date.parse(opened.circuit_opened_at);
    expect(h.logs.some((line) => line.includes('circuit breaker opened') && line.includes(webhookId))).toBe(true);

    // Some probing while open, then the endpoint answers again.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const recoveredAt = Date.now();
    endpoints.delete('down');
    for (const id of ids) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered', 40_000);
    // While it was open, one request at a time.
    const probes = requestsTo('down').filter((request) => request.receivedAt > openedAt && request.receivedAt < recoveredAt);
    expect(probes.length).toBeGreaterThan(0);
    expect(peakConcurrency(probes)).toBe(1);
    expect(await webhookOf(key.token, webhookId)).toMatchObject({ circuit_state: 'closed', consecutive_failures: 0 });
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_circuit_transitions_total\{state="opened"\} [1-9]/);
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_circuit_transitions_total\{state="closed"\} [1-9]/);
  }, 90_000);
});

describe('back-pressure and rate limits', () => {
  it("waits as long as a 429's Retry-After asks before the next attempt, and says so in next_retry_at", async () => {
    const { harness: h, receiver } = started;
    endpoints.set('busy', () => (requestsTo('busy').length === 1 ? { status: 429, headers: { 'Retry-After': '3' } } : { status: 200 }));
    const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/busy`);
    const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids;
    const failed = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed');
    expect(failed.last_status_code).toBe(429);
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
    const [first, second] = requestsFor(deliveryId!);
    expect(Date.parse(failed.next_retry_at) - first!.receivedAt).toBeGreaterThanOrEqual(2_900);
    // The policy alone would have waited 1 s.
    expect(second!.receivedAt - first!.receivedAt).toBeGreaterThanOrEqual(2_900);
  }, 30_000);

  it("spaces deliveries by the webhook's rate_limit, set and cleared through the API", async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/limited`, { rate_limit: 2 });
    expect((await webhookOf(key.token, webhookId)).rate_limit).toBe(2);
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) ids.push(...(await publishFor(h, key.projectId)).delivery_ids);
    for (const id of ids) {
      const delivered = await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered');
      expect(delivered.attempt_count).toBe(1);
    }
    const arrivals = requestsTo('limited').map((request) => request.receivedAt).sort((a, b) => a - b);
    // Each send has its own start time, 500 ms after the previous one's: the n-th arrives no
    // earlier than n × 500 ms after the first. Temporal's timers may fire late (they are not
    // sub-second precise), never early; a late one may arrive close to the next, which is on time.
    expect(arrivals).toHaveLength(4);
    arrivals.forEach((at, n) => expect(at - arrivals[0]!).toBeGreaterThanOrEqual(n * 500 - 50));

    const cleared = await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { rate_limit: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.data).not.toHaveProperty('rate_limit');
    const refused = await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { rate_limit: 0 } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('rate_limit') });
  }, 30_000);

  it('keeps the rate schedule when an update sends the rate_limit the webhook already has (as the portal form does)', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/kept-rate`, { rate_limit: 0.01 });
    for (let i = 0; i < 2; i += 1) await publishFor(h, key.projectId);
    // The first send goes at once; the second waits for its start, 100 s later.
    await waitFor('the first send', async () => requestsTo('kept-rate').length === 1);
    const schedule = async () => {
      const [row] = await queryRows<{ rate_next_at: string; starts: string[] }>(
        h.db,
        sql`select (select rate_next_at::text from webhooks where id = ${webhookId}) as rate_next_at,
                   array(select not_before::text from send_places where scope = ${`w:${webhookId}`} and attempt is null and not_before > now() order by not_before) as starts`,
      );
      return row!;
    };
    await waitFor('the second send to have its start', async () => (await schedule()).starts.length === 1);
    const before = await schedule();
    const saved = await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, {
      token: key.token,
      body: { url: `${receiver.url}/kept-rate`, events: ['docauth.completed'], status: 'active', rate_limit: 0.01 },
    });
    expect(saved.status).toBe(200);
    expect(await schedule()).toEqual(before);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(requestsTo('kept-rate')).toHaveLength(1);
  }, 30_000);

  it('a raised rate_limit applies at once to the sends already waiting for their start under the old one', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/raised`, { rate_limit: 0.01 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) ids.push(...(await publishFor(h, key.projectId)).delivery_ids);
    // One start every 100 s: the first send goes at once, the other two wait for starts 100 and 200 s later.
    await waitFor('the first send', async () => requestsTo('raised').length === 1);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(requestsTo('raised')).toHaveLength(1);
    const raisedAt = Date.now();
    const raised = await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { rate_limit: 100 } });
    expect(raised.status).toBe(200);
    for (const id of ids) {
      const delivered = await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered', 30_000);
      expect(delivered.attempt_count).toBe(1);
    }
    expect(requestsTo('raised')).toHaveLength(3);
    expect(Math.max(...requestsTo('raised').map((request) => request.receivedAt)) - raisedAt).toBeLessThan(60_000);
  }, 60_000);
});
