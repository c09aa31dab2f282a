/**
 * At most one attempt of a delivery is in flight, and only the current attempt records its
 * outcome: the races of a manual retry, a bulk retry and a late finish against a running attempt.
 */
import { eq } from 'drizzle-orm';
import { temporal } from '@temporalio/proto';
import { beforeEach, expect, it } from 'vitest';
import { finishAttempt, startAttempt, type AttemptResult } from '../../src/db/queries/deliveries.ts';
import { recordEvent } from '../../src/db/queries/events.ts';
import { deliveries, deliveryAttempts, webhooks } from '../../src/db/schema.ts';
import { retrySignal } from '../../workflows/delivery.ts';
import { docauthData, harnessWithReceiver } from '../support/harness.ts';
import { peakConcurrency } from '../support/https-receiver.ts';
import { waitFor } from '../support/wait.ts';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from './support.ts';

const { EventType } = temporal.api.enums.v1;

const started = harnessWithReceiver({ delivery: { timeoutMs: 20_000 } });
beforeEach(() => {
  // The first request of each delivery hangs (an attempt in flight); later ones are answered.
  started.receiver.behave((request) => (requestsFor(String(request.headers['x-service-delivery-id'])).length === 1 ? 'hang' : { status: 200 }));
});

const requestsFor = (deliveryId: string) => started.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);

/**
 * Publishes to a fresh webhook, lets `interrupt` act while the first attempt hangs at the
 * receiver, and checks that the second request came only after the first had ended.
 */
async function interruptRunningAttempt(interrupt: (webhook: { token: string; webhookId: string; deliveryId: string }) => Promise<void>) {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids;
  await waitFor('the first attempt to be out', () => requestsFor(deliveryId!).length > 0, { timeoutMs: 20_000, intervalMs: 50 });
  await interrupt({ token: key.token, webhookId, deliveryId: deliveryId! });
  await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
  const requests = requestsFor(deliveryId!);
  expect(requests).toHaveLength(2);
  expect(peakConcurrency(requests)).toBe(1);
  // The cancelled attempt was the service's doing, not the endpoint's: no failure counted.
  const [webhook] = await h.db.select().from(webhooks).where(eq(webhooks.id, webhookId));
  expect(webhook).toMatchObject({ failureCount: 0, consecutiveFailures: 0, circuitOpenedAt: null });
}

it('a retry signal during an attempt cancels it before the new round: never two requests at once', async () => {
  const { harness: h } = started;
  // A manual retry that reaches the workflow while its attempt runs (the API's status check
  // raced the attempt's start).
  await interruptRunningAttempt(({ deliveryId }) => h.client.workflow.getHandle(deliveryId).signal(retrySignal));
}, 60_000);

it('a bulk retry during an attempt cancels it before the new round: never two requests at once', async () => {
  const { harness: h } = started;
  await interruptRunningAttempt(async ({ token, webhookId, deliveryId }) => {
    // The operation matches the delivery as `failed`, as it was an instant before this attempt started.
    await h.db.update(deliveries).set({ status: 'failed' }).where(eq(deliveries.id, deliveryId));
    const started = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/retry`, { token, body: { status: ['failed'] } });
    expect(started.status).toBe(202);
  });
}, 60_000);

it('the late end of an abandoned attempt changes nothing: a delivered delivery stays delivered; a record tried again after its answer was lost is told apart', async () => {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  // A delivery of its own, with no workflow: this test plays the two attempts itself.
  const recorded = await recordEvent(h.db, h.secretBox, {
    projectId: key.projectId,
    producerEventId: 'late-finish',
    event: 'docauth.completed',
    occurredAt: new Date(),
    payload: docauthData(),
  });
  const deliveryId = recorded.deliveries[0]!.deliveryId;
  const result = (attemptId: string, outcome: AttemptResult['outcome'], statusCode: number): AttemptResult => ({
    attemptId,
    deliveryId,
    webhookId,
    outcome,
    statusCode,
    error: outcome === 'succeeded' ? undefined : `HTTP ${statusCode}`,
    durationMs: 5,
    finishedAt: new Date(),
    nextStatus: { status: 'failed', nextRetryAt: new Date(Date.now() + 1_000) },
  });
  const abandoned = await startAttempt(h.db, h.secretBox, deliveryId, new Date());
  // Its worker was presumed dead: the retry opens a new attempt (closing the old row) that succeeds.
  const retried = await startAttempt(h.db, h.secretBox, deliveryId, new Date());
  await finishAttempt(h.db, result(retried!.attempt!.attemptId, 'succeeded', 200), 5);
  // Then the abandoned attempt ends, late, with a failure.
  await finishAttempt(h.db, result(abandoned!.attempt!.attemptId, 'http_error', 500), 5);

  const [delivery] = await h.db.select().from(deliveries).where(eq(deliveries.id, deliveryId));
  expect(delivery).toMatchObject({ status: 'delivered', lastError: null, lastStatusCode: 200, nextRetryAt: null });
  const [webhook] = await h.db.select().from(webhooks).where(eq(webhooks.id, webhookId));
  expect(webhook).toMatchObject({ successCount: 1, failureCount: 0 });
  const [oldRow] = await h.db.select().from(deliveryAttempts).where(eq(deliveryAttempts.id, abandoned!.attempt!.attemptId));
  expect(oldRow).toMatchObject({ outcome: 'timeout', statusCode: null });
  // Told apart from an answer lost with its connection: the statement tried again after it
  // committed finds the row closed with its own result, not by a newer attempt.
  expect(await finishAttempt(h.db, result(abandoned!.attempt!.attemptId, 'http_error', 500), 5)).toEqual({ recorded: false });
  const lastTry = result(retried!.attempt!.attemptId, 'succeeded', 200);
  expect(await finishAttempt(h.db, { ...lastTry, durationMs: 5 }, 5)).toEqual({ recorded: true, byEarlierTry: true });
  expect(await finishAttempt(h.db, { ...lastTry, durationMs: 6 }, 5)).toEqual({ recorded: false });
  const [afterTries] = await h.db.select().from(webhooks).where(eq(webhooks.id, webhookId));
  expect(afterTries).toMatchObject({ successCount: 1, failureCount: 0 });
}, 30_000);

it('an attempt that fails after a retry asked to cancel it starts the new round, without a dead letter first', async () => {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids;
  await waitFor('the first attempt to be out', () => requestsFor(deliveryId!).length > 0, { timeoutMs: 20_000, intervalMs: 50 });
  const handle = h.client.workflow.getHandle(deliveryId!);
  await handle.signal(retrySignal);
  const eventTypes = async () => (await handle.fetchHistory()).events!.map((event) => event.eventType);
  await waitFor('the cancellation to be asked of the attempt', async () => (await eventTypes()).includes(EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED), { timeoutMs: 20_000, intervalMs: 50 });
  // The endpoint answers before the cancellation reaches the request (at the send's next heartbeat, 8 s on).
  receiver.answerHanging(500);
  await waitForDelivery(h, key.token, webhookId, deliveryId!, (d) => d.status === 'delivered');
  const history = (await handle.fetchHistory()).events!;
  // The server does not retry an activity asked to cancel: the round ended in this failure.
  expect(history.map((event) => event.eventType)).toContain(EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED);
  expect(history.filter((event) => event.markerRecordedEventAttributes?.markerName === 'core_local_activity')).toEqual([]);
  const statuses = history.flatMap((event) => Object.values(event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}));
  expect(statuses.map((payload) => Buffer.from(payload.data!).toString())).not.toContain('"dead_letter"');
  expect(requestsFor(deliveryId!)).toHaveLength(2);
}, 60_000);
