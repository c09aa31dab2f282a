import { beforeEach, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { deliveries, deliveryAttempts, webhooks } from '../../src/db/schema.ts';
import { sealWebhookHeaders } from '../../src/db/sealing.ts';
import { docauthData, harnessWithReceiver } from '../support/harness.ts';
import { DeliveryStatusAttribute } from '../../workflows/search-attributes.ts';
import { BASE, createWebhookFor, expectValidSignature, publishFor, waitForDelivery } from './support.ts';

const started = harnessWithReceiver({ delivery: { allowPrivateTargets: true } });
beforeEach(() => {
  started.receiver.requests.length = 0;
  started.receiver.behave(() => ({ status: 200 }));
});

const requestsFor = (deliveryId: string) =>
  started.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);

describe('a successful delivery', () => {
  it('sends the signed 6.2 notification with custom headers and records it as delivered', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId, secret } = await createWebhookFor(h, receiver.url, { headers: { 'X-Customer-Tag': 'blue' } });
    const data = docauthData();
    const published = await h.publish({
      project_id: key.projectId,
      event: 'docauth.completed',
      occurred_at: '2026-11-22T09:59:58.000Z',
      data,
    });
    expect(published.status).toBe(202);
    const [deliveryId] = published.body.data.delivery_ids as string[];
    expect(deliveryId).toMatch(/^dlv_/);

    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
    expect(delivered).toMatchObject({ attempt_count: 1, event: 'docauth.completed', webhook_config_id: webhookId });
    expect(delivered.delivered_at).toBeTruthy();
    expect(delivered).not.toHaveProperty('next_retry_at');
    expect(delivered).not.toHaveProperty('last_error');

    const [request] = requestsFor(deliveryId!);
    expect(request!.method).toBe('POST');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-service-event']).toBe('docauth.completed');
    expect(request!.headers['x-customer-tag']).toBe('blue');
    expectValidSignature(request!, secret);
    expect(JSON.parse(request!.rawBody.toString('utf8'))).toEqual({
      id: deliveryId,
      event: 'docauth.completed',
      timestamp: '2026-11-22T09:59:58.000Z',
      api_version: 'v1',
      data,
    });

    const webhook = await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token });
    expect(webhook.body.data).toMatchObject({ success_count: 1, failure_count: 0 });
    const list = await h.request('GET', `${BASE}/webhooks`, { token: key.token });
    expect(list.body.data[0].last_delivered_at).toBe(delivered.delivered_at);

    const attempts = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/attempts`, { token: key.token });
    expect(attempts.body.data).toHaveLength(1);
    expect(attempts.body.data[0]).toMatchObject({ attempt_number: 1, outcome: 'succeeded', status_code: 200 });
  });

  it('never lets a stored reserved header override the service headers', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId, secret } = await createWebhookFor(h, receiver.url);
    // The API refuses these names; a row written another way must still not win.
    await h.db
      .update(webhooks)
      .set({
        headersSealed: sealWebhookHeaders(h.secretBox, webhookId, {
          'X-Service-Signature': 'v1=forged',
          'x-service-event': 'evil',
          'Content-Type': 'text/plain',
          'X-Ok': '1',
        }),
      })
      .where(eq(webhooks.id, webhookId));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
    const [request] = requestsFor(deliveryId!);
    expectValidSignature(request!, secret);
    expect(request!.headers['x-service-event']).toBe('docauth.completed');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-ok']).toBe('1');
  });

  it('keeps event data and secrets out of the workflow history, search attributes and memo', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId, secret } = await createWebhookFor(h, `${receiver.url}?token=query-secret`);
    const data = docauthData();
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId, { data });
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
    const handle = h.client.workflow.getHandle(deliveryId!);
    expect(await handle.result()).toBe('delivered');
    const history = JSON.stringify(await handle.fetchHistory());
    const description = await handle.describe();
    const visible = history + JSON.stringify(description.raw);
    expect(visible).toContain(deliveryId);
    for (const value of [secret, 'query-secret', data.request_id, ...Object.values(data.docauth_info)]) {
      expect(visible).not.toContain(value);
      // Payloads are base64 in history: check the encoded form too.
      expect(visible).not.toContain(Buffer.from(JSON.stringify(value)).toString('base64'));
    }
    // The status describes an open workflow; a closed one's outcome is its result (no upsert, a billed action, as it ends).
    expect(description.typedSearchAttributes.get(DeliveryStatusAttribute)).toBe('pending');
    expect(history).not.toContain('upsertWorkflowSearchAttributesEventAttributes');
    expect(await description.staticSummary()).toBe(`docauth.completed → ${new URL(receiver.url).host}`);
  });
});

describe('retries', () => {
  it('retries a 500 with backoff gaps of about 1, 2, 4 and 8 s, then delivers on the fifth attempt', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId, secret } = await createWebhookFor(h, receiver.url);
    let seen = 0;
    receiver.behave(() => ({ status: ++seen < 5 ? 500 : 200 }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);

    const failed = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed' && d.attempt_count === 2);
    expect(failed).toMatchObject({ last_error: 'HTTP 500 Internal Server Error', last_status_code: 500 });
    expect(Date.parse(failed.next_retry_at)).toBeGreaterThan(Date.now() - 1000);

    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered', 60_000);
    expect(delivered.attempt_count).toBe(5);
    const sends = requestsFor(deliveryId!);
    expect(sends).toHaveLength(5);
    for (const send of sends) expectValidSignature(send, secret);
    expect(new Set(sends.map((send) => send.rawBody.toString('base64'))).size).toBe(1);
    const gaps = sends.slice(1).map((send, i) => (send.receivedAt - sends[i]!.receivedAt) / 1000);
    [1, 2, 4, 8].forEach((expected, i) => {
      expect(gaps[i]).toBeGreaterThanOrEqual(expected * 0.9);
      expect(gaps[i]).toBeLessThan(expected + 3);
    });
    const webhook = await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token });
    expect(webhook.body.data).toMatchObject({ success_count: 1, failure_count: 4 });
  });

  it('dead-letters after five failures, then a manual retry delivers it', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    receiver.behave(() => ({ status: 503 }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    const dead = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'dead_letter', 60_000);
    expect(dead).toMatchObject({ attempt_count: 5, last_status_code: 503, last_error: 'HTTP 503 Service Unavailable' });
    expect(dead).not.toHaveProperty('next_retry_at');
    expect(requestsFor(deliveryId!)).toHaveLength(5);

    receiver.behave(() => ({ status: 204 }));
    const retry = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`, { token: key.token });
    expect(retry.status).toBe(202);
    expect(retry.body.message).toMatch(/queued for retry/);
    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
    expect(delivered.attempt_count).toBe(6);
    const attempts = await h.db.select().from(deliveryAttempts).where(eq(deliveryAttempts.deliveryId, deliveryId!));
    expect(attempts.map((a) => a.outcome).sort()).toEqual(['http_error', 'http_error', 'http_error', 'http_error', 'http_error', 'succeeded']);
  });

  it('starts the next attempt at once when a retry is asked for during backoff', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    receiver.behave(() => ({ status: 500 }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    // After the fourth failure the next automatic attempt is 8 s away.
    const waiting = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed' && d.attempt_count === 4, 30_000);
    expect(Date.parse(waiting.next_retry_at) - Date.now()).toBeGreaterThan(5_000);
    receiver.behave(() => ({ status: 200 }));
    const askedAt = Date.now();
    const retry = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`, { token: key.token });
    expect(retry.status).toBe(202);
    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
    const fifth = requestsFor(deliveryId!)[4]!;
    expect(fifth.receivedAt - askedAt).toBeLessThan(4_000);
    expect(delivered.attempt_count).toBe(5);
  });

  it('signs pending retries with a rotated secret and sends them to an updated URL', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    receiver.behave(() => ({ status: 500 }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed' && d.attempt_count === 3, 30_000);
    const rotated = await h.request('POST', `${BASE}/webhooks/${webhookId}/rotate-secret`, { token: key.token });
    await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { url: `${receiver.url}/v2` } });
    receiver.behave(() => ({ status: 200 }));
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered', 30_000);
    const last = requestsFor(deliveryId!).at(-1)!;
    expect(last.path).toBe('/hooks/v2');
    expectValidSignature(last, rotated.body.data.secret);
  });
});

describe('failures of other kinds', () => {
  it('treats a redirect as a failure and does not follow it', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    receiver.behave((request) => (request.path === '/elsewhere' ? { status: 200 } : { status: 302, headers: { Location: '/elsewhere' } }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    const failed = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed');
    expect(failed.last_status_code).toBe(302);
    expect(failed.last_error).toBe('HTTP 302 Found (redirects are not followed)');
    expect(receiver.requests.some((request) => request.path === '/elsewhere')).toBe(false);
    await h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token });
  });

  it('records a refused connection as a network error', async () => {
    const { harness: h } = started;
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:1/hooks');
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    const failed = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed');
    expect(failed.last_error).toBe('connection refused');
    expect(failed).not.toHaveProperty('last_status_code');
    await h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token });
  });
});

describe('fan-out and webhook changes', () => {
  it('creates one delivery per active webhook, none for disabled ones, and one set for a repeated event id', async () => {
    const { harness: h, receiver } = started;
    const first = await createWebhookFor(h, receiver.url);
    const project = first.key;
    const second = await h.request('POST', `${BASE}/webhooks`, {
      token: project.token,
      body: { api_key_id: project.id, url: `${receiver.url}/second`, events: ['docauth.completed'] },
    });
    const disabled = await h.request('POST', `${BASE}/webhooks`, {
      token: project.token,
      body: { api_key_id: project.id, url: `${receiver.url}/disabled`, events: ['docauth.completed'] },
    });
    await h.request('PATCH', `${BASE}/webhooks/${disabled.body.data.id}`, { token: project.token, body: { status: 'disabled' } });

    const body = { id: `evt-${Date.now()}`, project_id: project.projectId, event: 'docauth.completed', data: docauthData() };
    const answers = await Promise.all(Array.from({ length: 5 }, () => h.publish(body)));
    for (const answer of answers) expect(answer.status).toBe(202);
    const ids = answers.map((answer) => JSON.stringify(answer.body.data));
    expect(new Set(ids).size).toBe(1);
    const deliveryIds = answers[0]!.body.data.delivery_ids as string[];
    expect(deliveryIds).toHaveLength(2);

    const rows = await h.db.select().from(deliveries).where(eq(deliveries.eventId, answers[0]!.body.data.event_id));
    expect(rows.map((row) => row.webhookId).sort()).toEqual([first.webhookId, second.body.data.id].sort());
    for (const row of rows) {
      await waitForDelivery(h, project.token, row.webhookId, row.id, (d) => d.status === 'delivered');
    }
    expect(receiver.requests.filter((r) => r.path === '/hooks/disabled')).toHaveLength(0);
    for (const id of deliveryIds) expect(requestsFor(id)).toHaveLength(1);
  });

  it('stops sending when the webhook is disabled during retries, dead-letters, and delivers on a manual retry after re-enabling', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    receiver.behave(() => ({ status: 500 }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed' && d.attempt_count === 2);
    await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { status: 'disabled' } });
    const dead = await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'dead_letter', 30_000);
    expect(dead.last_error).toBe('webhook is disabled');
    const sentWhileDisabled = requestsFor(deliveryId!).length;
    expect(sentWhileDisabled).toBeLessThanOrEqual(3);

    receiver.behave(() => ({ status: 200 }));
    await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { status: 'active' } });
    const retry = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`, { token: key.token });
    expect(retry.status).toBe(202);
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
  });

  it('cancels the delivery workflows of a deleted webhook and removes its records', async () => {
    const { harness: h, receiver } = started;
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    receiver.behave(() => ({ status: 500 }));
    const { delivery_ids: [deliveryId] } = await publishFor(h, key.projectId);
    await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'failed');
    const deleted = await h.request('DELETE', `${BASE}/webhooks/${webhookId}`, { token: key.token });
    expect(deleted.status).toBe(204);
    const handle = h.client.workflow.getHandle(deliveryId!);
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    expect(await h.db.$count(deliveries, eq(deliveries.id, deliveryId!))).toBe(0);
    expect(await h.db.$count(deliveryAttempts, eq(deliveryAttempts.deliveryId, deliveryId!))).toBe(0);
  });
});
