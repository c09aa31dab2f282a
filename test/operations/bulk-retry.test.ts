import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from '../delivery/support.ts';
import { and, eq, inArray } from 'drizzle-orm';
import { recordEvent } from '../../src/db/queries/events.ts';
import { createRetryOperation, findOperation, type OperationView } from '../../src/db/queries/operations.ts';
import { deliveries, operationDeliveries } from '../../src/db/schema.ts';
import { findWebhook } from '../../src/db/queries/webhooks.ts';
import { repairOrphanedOperations } from '../../src/repair/orphaned-operations.ts';
import { DeliveryScheduler } from '../../src/temporal/scheduler.ts';
import { bulkRetryWorkflow } from '../../workflows/bulk-retry.ts';
import { deadlineIn, waitFor } from '../support/wait.ts';
import { docauthData, startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';

const RATE = 4;
/** Bulk retries a project may have running at once, in this file (BULK_RETRY_MAX_PER_PROJECT). */
const MAX_PER_PROJECT = 2;
let h: Harness;
let receiver: HttpsReceiver;
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, bulkRetryRate: RATE, delivery: { caFile: receiver.certFile }, admission: { maxBulkRetries: MAX_PER_PROJECT } });
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

async function waitForOperation(token: string, webhookId: string, operationId: string, predicate: (op: Record<string, any>) => boolean) {
  const deadline = deadlineIn(60_000);
  for (;;) {
    const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/operations/${operationId}`, { token });
    if (predicate(response.body.data)) return response.body.data as Record<string, any>;
    if (deadline.passed()) throw new Error(`operation ${operationId}: ${JSON.stringify(response.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

type Key = Awaited<ReturnType<typeof createWebhookFor>>['key'];

/** How long `count` retries take at least at RATE a second, a second's worth at a time: whole seconds between the steps (less a margin). */
const minimumSpanMs = (count: number) => (Math.ceil(count / RATE) - 1) * 1000 * 0.8;
const spanMs = (times: number[]) => Math.max(...times) - Math.min(...times);

/** Another webhook of `key`'s project, on the receiver. */
async function anotherWebhook(key: Key) {
  const created = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: { api_key_id: key.id, url: receiver.url, events: ['docauth.completed'] } });
  expect(created.status).toBe(201);
  return { key, webhookId: created.body.data.id as string };
}

/**
 * `count` deliveries of a webhook stored straight in `dead_letter`, as a long outage leaves them
 * (no workflow runs for them: a retry starts one).
 */
async function seededDeadLetters(key: Key, webhookId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const recorded = await recordEvent(h.db, h.secretBox, { projectId: key.projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData(), onlyWebhookId: webhookId });
    ids.push(recorded.deliveries[0]!.deliveryId);
  }
  await h.db.update(deliveries).set({ status: 'dead_letter', attemptCount: 5 }).where(inArray(deliveries.id, ids));
  return ids;
}

/** The ids of the deliveries of these webhooks. */
async function seededDeliveries(webhookIds: string[]): Promise<string[]> {
  return (await h.db.select({ id: deliveries.id }).from(deliveries).where(inArray(deliveries.webhookId, webhookIds))).map((row) => row.id);
}

/** A bulk retry started over `count` deliveries seeded in `dead_letter` on a new webhook, whose endpoint now answers 200. */
async function retryingSeeded(count: number) {
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  const ids = await seededDeadLetters(key, webhookId, count);
  receiver.behave(() => ({ status: 200 }));
  const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token });
  expect(started.status).toBe(202);
  return { key, webhookId, ids, operationId: started.body.data.id as string };
}

/** The retry signals a delivery's workflow got, as its history records them. */
async function retrySignalsOf(deliveryId: string) {
  const { events } = await h.client.workflow.getHandle(deliveryId).fetchHistory();
  return (events ?? []).filter((event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'retry');
}

/**
 * How long `count` deliveries may take to dead-letter. Once five attempts in a row have failed,
 * the open circuit breaker lets one attempt at a time reach the endpoint, so the rounds of a
 * dozen deliveries run mostly one after another: about 16 s on a quiet machine, and over 60 s
 * on a loaded one (seen in CI, beside the other suite file and the image builds).
 */
const DEAD_LETTERING_MS = 180_000;
/** A test that dead-letters its deliveries first, then retries them. */
const TEST_MS = DEAD_LETTERING_MS + 120_000;

/** A new webhook with `count` deliveries dead-lettered (its endpoint answers 503 meanwhile). */
async function deadLettered(count: number) {
  receiver.behave(() => ({ status: 503 }));
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push(...(await publishFor(h, key.projectId)).delivery_ids);
  const deadline = deadlineIn(DEAD_LETTERING_MS);
  for (const id of ids) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'dead_letter', Math.max(1, deadline.leftMs()));
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
    // The operation selects its deliveries in pages as it goes: none yet when it starts.
    expect(started.status).toBe(202);
    expect(started.body.data).toEqual({ id: expect.stringMatching(/^op_[0-9a-z]{26}$/), status: 'running', matched: 0 });
    // Once it has selected them, the last one (it goes in id order) is retried by hand: the
    // operation finds it moved on when it gets there, and skips it.
    await waitForOperation(key.token, webhookId, started.body.data.id, (op) => op.matched === 9);
    const manual = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${ids[8]}/retry`, { token: key.token });
    expect(manual.status).toBe(202);
    const done = await waitForOperation(key.token, webhookId, started.body.data.id, (op) => op.status !== 'running');
    expect(done).toEqual({ id: started.body.data.id, status: 'completed', matched: 9, retried: 8, skipped: 1 });
    for (const id of ids) await waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered');
    expect(answeredOk.map((request) => request.id).sort()).toEqual([...ids].sort());
    const byOperation = answeredOk.filter((request) => request.id !== ids[8]).map((request) => request.at);
    expect(spanMs(byOperation)).toBeGreaterThan(minimumSpanMs(byOperation.length));

    // The retention sweep deletes the deliveries, with the operation's own rows of them: its counts stay.
    await h.db.delete(deliveries).where(inArray(deliveries.id, ids));
    const swept = await h.request('GET', `${BASE}/webhooks/${webhookId}/operations/${started.body.data.id}`, { token: key.token });
    expect(swept.body.data).toEqual(done);
  }, TEST_MS);

  it('stops after the step in hand when cancelled, and records itself cancelled with the count it reached', async () => {
    const { key, webhookId } = await deadLettered(12);
    receiver.behave(() => ({ status: 200 }));
    // No body, but the JSON Content-Type many clients set on every request: the defaults apply.
    const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, {
      token: key.token,
      rawBody: '',
      headers: { 'Content-Type': 'application/json', 'Content-Length': '0' },
    });
    expect(started.status).toBe(202);
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
  }, TEST_MS);

  it('continues as new across pages and finishes the same operation', async () => {
    const { key, webhookId, ids } = await deadLettered(6);
    receiver.behave(() => ({ status: 200 }));
    const webhook = await findWebhook(h.db, webhookId);
    const operation = (await createRetryOperation(h.db, { projectId: key.projectId, webhookId, statuses: ['dead_letter'], until: new Date() }, 3)) as OperationView;
    // Steps of 2 deliveries, 2 steps per run: the first run handles 4 and continues as new; the
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
  }, TEST_MS);

  it("refuses a second running operation on a webhook, naming the running one, and more than the project's limit of running operations", async () => {
    receiver.behave(() => ({ status: 200 }));
    const first = await createWebhookFor(h, receiver.url);
    const other = await anotherWebhook(first.key);
    const third = await anotherWebhook(first.key);
    // Enough dead letters that the operations run for a while (RATE a second, shared by the project's).
    for (const { webhookId } of [first, other]) await seededDeadLetters(first.key, webhookId, 40);
    const running = await h.request('POST', `${BASE}/webhooks/${first.webhookId}/deliveries/retry`, { token: first.key.token });
    expect(running.status).toBe(202);
    const second = await h.request('POST', `${BASE}/webhooks/${first.webhookId}/deliveries/retry`, { token: first.key.token });
    expect(second.status).toBe(409);
    expect(second.body.error).toEqual({ code: 'conflict', message: expect.stringContaining(`operation ${running.body.data.id} is already retrying deliveries of webhook ${first.webhookId}`) });

    // The project's other webhooks: MAX_PER_PROJECT operations run at once, the next is refused.
    expect((await h.request('POST', `${BASE}/webhooks/${other.webhookId}/deliveries/retry`, { token: first.key.token })).status).toBe(202);
    const over = await h.request('POST', `${BASE}/webhooks/${third.webhookId}/deliveries/retry`, { token: first.key.token });
    expect(over.status).toBe(409);
    expect(over.body.error.message).toBe(`project ${first.key.projectId} has ${MAX_PER_PROJECT} bulk retries running, its limit: wait until one ends`);
    // Another project is not held back by this one's.
    const elsewhere = await createWebhookFor(h, receiver.url);
    expect((await h.request('POST', `${BASE}/webhooks/${elsewhere.webhookId}/deliveries/retry`, { token: elsewhere.key.token })).status).toBe(202);

    // Once the first ends, its webhook may have another.
    await h.request('DELETE', `${BASE}/webhooks/${first.webhookId}/operations/${running.body.data.id}`, { token: first.key.token });
    await waitForOperation(first.key.token, first.webhookId, running.body.data.id, (op) => op.status !== 'running');
    expect((await h.request('POST', `${BASE}/webhooks/${first.webhookId}/deliveries/retry`, { token: first.key.token })).status).toBe(202);
  }, 120_000);

  it("shares BULK_RETRY_RATE among a project's operations, paces them with workflow timers (no activity waits in a worker slot) under the project's fairness key", async () => {
    const a = await createWebhookFor(h, receiver.url);
    const b = await anotherWebhook(a.key);
    for (const { webhookId } of [a, b]) await seededDeadLetters(a.key, webhookId, 4);
    const seeded = new Set(await seededDeliveries([a.webhookId, b.webhookId]));
    const answered: number[] = [];
    receiver.behave((request) => {
      if (seeded.has(String(request.headers['x-service-delivery-id']))) answered.push(request.receivedAt);
      return { status: 200 };
    });
    const ids = [];
    for (const { webhookId } of [a, b]) {
      const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: a.key.token });
      expect(started.status).toBe(202);
      ids.push({ webhookId, operationId: started.body.data.id as string });
    }
    for (const { webhookId, operationId } of ids) await waitForOperation(a.key.token, webhookId, operationId, (op) => op.status === 'completed' && op.retried === 4);
    // Together at most RATE a second (each alone would have gone at RATE: all 8 within a second).
    expect(answered).toHaveLength(8);
    expect(spanMs(answered)).toBeGreaterThan(minimumSpanMs(answered.length));

    const history = await h.client.workflow.getHandle(ids[0]!.operationId).fetchHistory();
    const events = history.events ?? [];
    const steps = events.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'retryOperationStep');
    expect(steps.length).toBeGreaterThan(1);
    // The waits between steps are the workflow's timers, not sleeps inside the activities.
    expect(events.filter((event) => event.timerStartedEventAttributes).length).toBeGreaterThanOrEqual(steps.length - 2);
    for (const step of steps) expect(step.activityTaskScheduledEventAttributes?.priority?.fairnessKey).toBe(a.key.projectId);
    expect(events[0]!.workflowExecutionStartedEventAttributes?.priority?.fairnessKey).toBe(a.key.projectId);
  }, 120_000);

  it("spreads a step's signals over its second in the worker's background: no burst for other projects' sends to queue behind", async () => {
    const { key, webhookId, ids, operationId } = await retryingSeeded(2 * RATE);
    await waitForOperation(key.token, webhookId, operationId, (op) => op.status === 'completed' && op.retried === ids.length);

    // When each delivery's workflow got the operation's retry signal, as the server recorded it.
    const signalledAt = await Promise.all(
      ids.map(async (id) => {
        const [signal] = await retrySignalsOf(id);
        return Number(signal!.eventTime!.seconds) * 1000 + Math.floor((signal!.eventTime!.nanos ?? 0) / 1e6);
      }),
    );
    signalledAt.sort((a, b) => a - b);
    const gaps = signalledAt.slice(1).map((at, i) => at - signalledAt[i]!);
    // One signal every 1/RATE s (250 ms): in steps of RATE back to back, RATE - 1 of every RATE
    // gaps were a few milliseconds. One gap a step may fall short of half the spacing: a signal
    // delayed on a loaded machine shortens the gap after it, and the wait between two steps
    // shortens by what the next one takes to start (the first step also selects the deliveries).
    expect(gaps.filter((gap) => gap < 1000 / RATE / 2).length, `gaps ${gaps.join(', ')} ms`).toBeLessThanOrEqual(ids.length / RATE);

    const history = await h.client.workflow.getHandle(operationId).fetchHistory();
    const steps = (history.events ?? []).filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'retryOperationStep');
    expect(steps.length).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('ends a step with the signals it sent when its worker begins to stop; the next worker retries the rest, each once', async () => {
    const { key, webhookId, ids, operationId } = await retryingSeeded(3 * RATE);
    const retried = async () =>
      (await h.db.select({ id: operationDeliveries.deliveryId }).from(operationDeliveries).where(and(eq(operationDeliveries.operationId, operationId), eq(operationDeliveries.state, 'retried')))).length;
    // Inside a step: some of its share signalled, the rest still waiting for their time.
    await waitFor('a step part-way through its signals', async () => (await retried()) % RATE !== 0, { timeoutMs: 30_000, intervalMs: 20 });
    const logsBefore = h.logs.length;
    await h.stopWorker();
    const partial = await waitFor('the stopped step to end', () =>
      h.logs
        .slice(logsBefore)
        .map((line) => JSON.parse(line))
        .find((line) => line.msg === 'bulk retry step' && line.operationId === operationId),
    );
    expect(partial.retried).toBeGreaterThan(0);
    expect(partial.retried).toBeLessThan(RATE);
    await h.startWorker();

    const done = await waitForOperation(key.token, webhookId, operationId, (op) => op.status !== 'running');
    expect(done).toEqual({ id: operationId, status: 'completed', matched: ids.length, retried: ids.length, skipped: 0 });
    for (const id of ids) expect(await retrySignalsOf(id)).toHaveLength(1);
    // The stopped step reported its end: none waited for its heartbeat to time out.
    const history = await h.client.workflow.getHandle(operationId).fetchHistory();
    expect((history.events ?? []).filter((event) => event.activityTaskTimedOutEventAttributes)).toHaveLength(0);
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
    const future = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, {
      token: key.token,
      body: { since: new Date(Date.now() + 3_600_000).toISOString() },
    });
    expect(future.status).toBe(400);
    expect(future.body.error.message).toBe('since: must be before until, and before now');
    // Well-formed, but before year 1 once in UTC: no column stores it (it was a 500).
    const yearZero = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token, body: { since: '0000-01-01T00:00:00Z' } });
    expect(yearZero.status).toBe(400);
    expect(yearZero.body.error.code).toBe('invalid_request');
    const empty = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token });
    expect(empty.status).toBe(202);
    expect(empty.body.data.matched).toBe(0);
    const missing = await h.request('GET', `${BASE}/webhooks/${webhookId}/operations/op_00000000000000000000000000`, { token: key.token });
    expect(missing.status).toBe(404);
  });

  it("takes a since before 1970 (a client's unset time) as from the beginning, not as matching nothing", async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const [deliveryId] = await seededDeadLetters(key, webhookId, 1);
    const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token: key.token, body: { since: '0001-01-01T00:00:00Z' } });
    expect(started.status).toBe(202);
    const done = await waitForOperation(key.token, webhookId, started.body.data.id, (op) => op.status === 'completed');
    expect(done.matched).toBe(1);
    expect(done.retried).toBe(1);
    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId!, (delivery) => delivery.status === 'delivered');
    expect(delivered.status).toBe('delivered');
  }, 60_000);
});

describe('an operation no workflow runs', () => {
  const repairDeps = () => ({ db: h.db, scheduler: h.scheduler, logger: h.logger, metrics: h.metrics });
  const retry = (token: string, webhookId: string) => h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token });

  it('is started by the repair check when its API process stopped before starting it', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const [deliveryId] = await seededDeadLetters(key, webhookId, 1);
    // What an API process that stopped right after storing the operation leaves behind.
    const stored = await createRetryOperation(h.db, { projectId: key.projectId, webhookId, statuses: ['dead_letter'], until: new Date() }, MAX_PER_PROJECT);
    if (!('id' in stored)) throw new Error(`operation refused: ${JSON.stringify(stored)}`);
    expect(await h.scheduler.operationWorkflowState(stored.id)).toBe('none');
    expect((await retry(key.token, webhookId)).status).toBe(409);

    expect(await repairOrphanedOperations(repairDeps(), 0)).toMatchObject({ operation_never_started: 1 });
    const done = await waitForOperation(key.token, webhookId, stored.id, (op) => op.status === 'completed');
    expect(done).toMatchObject({ matched: 1, retried: 1 });
    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId!, (delivery) => delivery.status === 'delivered');
    expect(delivered.status).toBe('delivered');
  }, 60_000);

  it('is found by the repair check also when more healthy operations are running than a run looks at, older ones first', async () => {
    // A healthy operation, the older: its workflow runs (on a task queue no worker polls, so it stays running).
    const healthy = await createWebhookFor(h, receiver.url);
    const running = await createRetryOperation(h.db, { projectId: healthy.key.projectId, webhookId: healthy.webhookId, statuses: ['dead_letter'], until: new Date() }, MAX_PER_PROJECT);
    if (!('id' in running)) throw new Error(`operation refused: ${JSON.stringify(running)}`);
    await new DeliveryScheduler(h.client, `${h.taskQueue}-unpolled`).startRetryOperation(running);
    // Another project's operation, stored after it, whose API process stopped before starting it.
    const orphan = await createWebhookFor(h, receiver.url);
    const stored = await createRetryOperation(h.db, { projectId: orphan.key.projectId, webhookId: orphan.webhookId, statuses: ['dead_letter'], until: new Date() }, MAX_PER_PROJECT);
    if (!('id' in stored)) throw new Error(`operation refused: ${JSON.stringify(stored)}`);
    try {
      // Runs that look at one operation each: the oldest-first order looked at the healthy one every time.
      let runs = 0;
      while ((await h.scheduler.operationWorkflowState(stored.id)) === 'none' && runs < 100) {
        await repairOrphanedOperations(repairDeps(), 0, 1);
        runs += 1;
      }
      expect(await h.scheduler.operationWorkflowState(stored.id)).not.toBe('none');
      expect(await h.scheduler.operationWorkflowState(running.id)).toBe('running');
    } finally {
      await h.client.workflow.getHandle(running.id).terminate('end of test');
      await repairOrphanedOperations(repairDeps(), 0);
    }
  }, 60_000);

  it('ends when its workflow was ended from outside: cancelled by DELETE, failed by the repair check; the webhook can be retried again', async () => {
    const terminatedOperation = async () => {
      const { key, webhookId } = await createWebhookFor(h, receiver.url);
      await seededDeadLetters(key, webhookId, RATE * 10);
      const started = await retry(key.token, webhookId);
      expect(started.status).toBe(202);
      const operationId = started.body.data.id as string;
      await h.client.workflow.getHandle(operationId).terminate('ended from the Web UI');
      return { key, webhookId, operationId };
    };

    const cancelled = await terminatedOperation();
    const deleted = await h.request('DELETE', `${BASE}/webhooks/${cancelled.webhookId}/operations/${cancelled.operationId}`, { token: cancelled.key.token });
    expect(deleted.status).toBe(202);
    expect(deleted.body.data.status).toBe('cancelled');
    expect((await retry(cancelled.key.token, cancelled.webhookId)).status).toBe(202);

    const failed = await terminatedOperation();
    expect(await repairOrphanedOperations(repairDeps(), 0)).toMatchObject({ operation_workflow_closed: 1 });
    const ended = await h.request('GET', `${BASE}/webhooks/${failed.webhookId}/operations/${failed.operationId}`, { token: failed.key.token });
    expect(ended.body.data.status).toBe('failed');
    // The deliveries it had queued were signalled as it ended: none is left pending without its retry.
    const queued = await h.db.select({ state: operationDeliveries.state }).from(operationDeliveries).where(eq(operationDeliveries.operationId, failed.operationId));
    expect(queued.filter((item) => item.state === 'queued')).toEqual([]);
    expect((await retry(failed.key.token, failed.webhookId)).status).toBe(202);
  }, 60_000);
});
