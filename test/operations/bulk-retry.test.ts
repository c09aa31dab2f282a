import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from '../delivery/support.ts';
import { createRetryOperation, findOperation } from '../../src/db/queries/operations.ts';
import { findWebhook } from '../../src/db/queries/webhooks.ts';
import { bulkRetryWorkflow } from '../../workflows/bulk-retry.ts';
import { waitFor } from '../faults/wait.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';

const RATE = 4;
let h: Harness;
let receiver: HttpsReceiver;
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, bulkRetryRate: RATE, delivery: { caFile: receiver.certFile } });
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

async function waitForOperation(token: string, webhookId: string, operationId: string, predicate: (op: Record<string, any>) => boolean) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/operations/${operationId}`, { token });
    if (predicate(response.body.data)) return response.body.data as Record<string, any>;
    if (Date.now() > deadline) throw new Error(`operation ${operationId}: ${JSON.stringify(response.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A new webhook with `count` deliveries dead-lettered (its endpoint answers 503 meanwhile). */
async function deadLettered(count: number) {
  receiver.behave(() => ({ status: 503 }));
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push(...(await publishFor(h, key.projectId)).delivery_ids);
  for (const id of ids) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'dead_letter', 60_000);
  return { key, webhookId, ids };
}

describe('POST /webhooks/{id}/deliveries/retry', () => {
  it('retries every dead-lettered delivery once, at the configured rate, and skips one that moved on', async () => {
    const { key, webhookId, ids } = await deadLettered(9);
    const answeredOk: Array<{ id: string; at: number }> = [];
    receiver.behave((request) => {
      answeredOk.push({ id: String(request.headers['x-service-delivery-id']), at: request.receivedAt });
      return { status: 200 };
    });

    const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token, body: { status: ['dead_letter'] } });
    // The last one (the operation goes in id order) is retried by hand meanwhile: the operation
    // finds it moved on and skips it.
    const manual = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${ids[8]}/retry`, { token: key.token });

    expect(started.status).toBe(202);
    expect(started.body.data).toEqual({ id: expect.stringMatching(/^op_[0-9a-z]{26}$/), status: 'running', matched: 9 });
    expect(manual.status).toBe(202);
    const done = await waitForOperation(key.token, webhookId, started.body.data.id, (op) => op.status !== 'running');
    expect(done).toEqual({ id: started.body.data.id, status: 'completed', matched: 9, retried: 8, skipped: 1 });
    for (const id of ids) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered');
    expect(answeredOk.map((request) => request.id).sort()).toEqual([...ids].sort());
    // At most RATE a second: the operation's 8 sends span at least 7 / RATE seconds (less a margin).
    const byOperation = answeredOk.filter((request) => request.id !== ids[8]).map((request) => request.at);
    expect(Math.max(...byOperation) - Math.min(...byOperation)).toBeGreaterThan(((byOperation.length - 1) / RATE) * 1000 * 0.8);
  }, 120_000);

  it('stops after the delivery in hand when cancelled, and records itself cancelled with the count it reached', async () => {
    const { key, webhookId, ids } = await deadLettered(12);
    receiver.behave(() => ({ status: 200 }));
    const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token });
    const operationId = started.body.data.id as string;
    await waitForOperation(key.token, webhookId, operationId, (op) => op.retried >= 2);

    const cancelled = await h.request('DELETE', `${BASE}/webhooks/${webhookId}/operations/${operationId}`, { token: key.token });

    expect(cancelled.status).toBe(202);
    expect(cancelled.body.message).toBe(`Operation ${operationId} is being cancelled`);
    const done = await waitForOperation(key.token, webhookId, operationId, (op) => op.status !== 'running');
    expect(done.status).toBe('cancelled');
    expect(done.retried).toBeLessThan(12);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const after = await h.request('GET', `${BASE}/webhooks/${webhookId}/operations/${operationId}`, { token: key.token });
    expect(after.body.data.retried).toBe(done.retried);
    const again = await h.request('DELETE', `${BASE}/webhooks/${webhookId}/operations/${operationId}`, { token: key.token });
    expect(again.body.message).toBe(`Operation ${operationId} is already cancelled`);
  }, 120_000);

  it('continues as new across pages and finishes the same operation', async () => {
    const { key, webhookId, ids } = await deadLettered(6);
    receiver.behave(() => ({ status: 200 }));
    const webhook = await findWebhook(h.db, webhookId);
    const operation = await createRetryOperation(h.db, { projectId: key.projectId, webhookId, statuses: ['dead_letter'], until: new Date() });
    // Pages of 2 deliveries, 2 pages per run: the first run handles 4 and continues as new; the
    // second handles the last 2, finds none left and completes the operation.
    const handle = await h.client.workflow.start(bulkRetryWorkflow, {
      workflowId: operation.id,
      taskQueue: h.taskQueue,
      args: [{ operationId: operation.id, ratePerSecond: 2, pagesPerRun: 2 }],
    });
    await handle.result();

    // Visibility is written after the fact: poll until both runs show in their final states.
    const runStatuses = async () => {
      const runs: string[] = [];
      for await (const execution of h.client.workflow.list({ query: `WorkflowId = "${operation.id}"` })) runs.push(execution.status.name);
      return runs.sort();
    };
    const finalRuns = ['COMPLETED', 'CONTINUED_AS_NEW'];
    await waitFor('both runs closed in visibility', async () => (await runStatuses()).join() === finalRuns.join(), { timeoutMs: 20_000, intervalMs: 100 });
    expect(await runStatuses()).toEqual(finalRuns);
    expect(await findOperation(h.db, webhook!.id, operation.id)).toMatchObject({ status: 'completed', matched: 6, retried: 6, skipped: 0 });
    for (const id of ids) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered');
  }, 120_000);

  it('refuses a bad body with the v2 error, and answers 404 for an unknown operation', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const bad = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token, body: { status: ['delivered'] } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    const reversed = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, {
      token: key.token,
      body: { since: '2026-11-23T00:00:00Z', until: '2026-11-22T00:00:00Z' },
    });
    expect(reversed.status).toBe(400);
    const empty = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token });
    expect(empty.status).toBe(202);
    expect(empty.body.data.matched).toBe(0);
    const missing = await h.request('GET', `${BASE}/webhooks/${webhookId}/operations/op_00000000000000000000000000`, { token: key.token });
    expect(missing.status).toBe(404);
  });
});
