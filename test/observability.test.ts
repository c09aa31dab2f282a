import { sql } from 'drizzle-orm';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { serveMetrics } from '../src/metrics.ts';
import { docauthData, startHarness, type Harness } from './support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from './support/https-receiver.ts';
import { createWebhookFor, waitForDelivery } from './delivery/support.ts';

let h: Harness;
let receiver: HttpsReceiver;
let metricsServer: Server;
let metricsUrl: string;
let secret: string;
let token: string;
let producerKey: string;
let webhookId: string;
let deliveryId: string;
const data = docauthData();
// A custom header as customers use them: a credential for their own endpoint.
const customHeaderValue = `Bearer customer-endpoint-${randomUUID()}`;

beforeAll(async () => {
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, delivery: { caFile: receiver.certFile } });
  metricsServer = await serveMetrics(h.metrics, undefined, { host: '127.0.0.1', port: 0 });
  metricsUrl = `http://127.0.0.1:${(metricsServer.address() as AddressInfo).port}/metrics`;
  let calls = 0;
  receiver.behave(() => ({ status: ++calls === 1 ? 500 : 200 }));
  const created = await createWebhookFor(h, receiver.url, { headers: { Authorization: customHeaderValue } });
  ({ secret, webhookId } = created);
  token = created.key.token;
  producerKey = await h.producerKey(created.key.projectId);
  const published = await h.publish({ project_id: created.key.projectId, event: 'docauth.completed', data });
  deliveryId = published.body.data.delivery_ids[0];
  await waitForDelivery(h, token, webhookId, deliveryId, (d) => d.status === 'delivered');
  expect(receiver.requests.at(-1)!.headers['authorization']).toBe(customHeaderValue);
  await h.request('POST', `/api-gateway/v2/webhooks/${webhookId}/rotate-secret`, { token });
});
afterAll(async () => {
  await new Promise((resolve) => metricsServer?.close(resolve));
  await h?.stop();
  await receiver?.close();
});

describe('GET /metrics', () => {
  it('exposes delivery, attempt and API metrics in Prometheus text with bounded labels, on its own server', async () => {
    const response = await fetch(metricsUrl);
    expect(response.status).toBe(200);
    expect(response.headers.get('Content-Type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    expect(text).toContain('webhook_events_accepted_total 1');
    expect(text).toContain('webhook_delivery_attempts_total{outcome="5xx"} 1');
    expect(text).toContain('webhook_delivery_attempts_total{outcome="2xx"} 1');
    expect(text).toContain('webhook_deliveries_finished_total{status="delivered"} 1');
    expect(text).toMatch(/webhook_delivery_attempt_duration_seconds_count\{outcome="2xx"\} 1/);
    expect(text).toMatch(/webhook_publish_to_delivered_seconds_count 1/);
    expect(text).toMatch(/http_requests_total\{method="POST",route="\/api-gateway\/v2\/webhooks",status="201"\} 1/);
    expect(text).toMatch(/http_requests_total\{method="GET",route="\/api-gateway\/v2\/webhooks\/:id\/deliveries\/:delivery_id",status="200"\} \d+/);
    expect(text).toMatch(/http_request_duration_seconds_count\{method="POST",route="\/internal\/v1\/events",status="202"\} 1/);
    expect(text).toContain('process_resident_memory_bytes');
    for (const id of [webhookId, deliveryId, data.request_id]) expect(text).not.toContain(id);
    for (const line of text.split('\n').filter((l) => l && !l.startsWith('#'))) {
      expect(line).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eE]+|NaN|[+-]Inf$/);
    }
  });
});

describe('a full run', () => {
  it('leaves no secret, token, custom header or event data in any log line, workflow history, search attribute, memo, metric or database row', async () => {
    const rotated = await h.request('POST', `/api-gateway/v2/webhooks/${webhookId}/rotate-secret`, { token });
    const updated = await h.request('PATCH', `/api-gateway/v2/webhooks/${webhookId}`, { token, body: { headers: { Authorization: customHeaderValue } } });
    expect(updated.body.data.headers).toEqual({ Authorization: customHeaderValue });
    const forbidden = [
      secret,
      rotated.body.data.secret,
      token,
      producerKey,
      h.producerToken,
      customHeaderValue,
      data.request_id,
      ...Object.values(data.docauth_info),
    ];
    const seen: string[] = [...h.logs];
    let workflows = 0;
    for await (const execution of h.client.workflow.list({ query: `TaskQueue = "${h.taskQueue}"` })) {
      const handle = h.client.workflow.getHandle(execution.workflowId, execution.runId);
      seen.push(JSON.stringify(await handle.fetchHistory()), JSON.stringify((await handle.describe()).raw));
      workflows += 1;
    }
    expect(workflows).toBeGreaterThan(0);
    seen.push(await (await fetch(metricsUrl)).text());
    const tables = await queryRows<{ name: string }>(h.db, sql`select table_name as name from information_schema.tables where table_schema = 'public'`);
    expect(tables.map((table) => table.name)).toEqual(expect.arrayContaining(['events', 'deliveries', 'delivery_attempts', 'webhooks']));
    for (const { name } of tables) seen.push(JSON.stringify(await queryRows(h.db, sql`select * from ${sql.identifier(name)}`)));
    const everything = seen.join('\n');
    for (const value of forbidden) {
      expect(everything).not.toContain(value);
      expect(everything).not.toContain(Buffer.from(JSON.stringify(value)).toString('base64'));
    }
  });
});

describe('logs', () => {
  it('are JSON lines carrying request, webhook and delivery ids, and never a secret, token, custom header or event data', () => {
    const entries = h.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.some((e) => typeof e.requestId === 'string' && e.webhookId === webhookId)).toBe(true);
    expect(entries.some((e) => e.deliveryId === deliveryId && e.msg === 'delivery attempt succeeded')).toBe(true);
    expect(entries.some((e) => e.deliveryId === deliveryId && e.msg === 'delivery attempt failed' && e.statusCode === 500)).toBe(true);
    const all = h.logs.join('\n');
    for (const forbidden of [secret, token, producerKey, h.producerToken, customHeaderValue, data.request_id, ...Object.values(data.docauth_info)]) {
      expect(all).not.toContain(forbidden);
    }
  });
});
