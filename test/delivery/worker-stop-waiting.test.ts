/**
 * A send waiting for room in its worker (WORKER_MAX_SENDS_IN_FLIGHT) leaves without an attempt
 * when that worker begins to stop (its round waits, and another worker makes the attempt) or when
 * a manual retry cancels it.
 */
import { temporal } from '@temporalio/proto';
import { expect, it } from 'vitest';
import { retrySignal } from '../../workflows/delivery.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { createWebhookFor, publishFor, waitForDelivery } from './support.ts';

const { EventType, PendingActivityState } = temporal.api.enums.v1;

// Room for one send at a time in the worker: a second waits for it in its activity.
const started = harnessWithReceiver({ flow: { workerMaxInFlight: 1 } });

const requestsFor = (deliveryId: string) => started.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);

/** The results of the send activities the delivery's workflow has completed so far. */
async function sendResults(deliveryId: string): Promise<unknown[]> {
  const { events } = await started.harness.client.workflow.getHandle(deliveryId).fetchHistory();
  return (events ?? []).flatMap((event) =>
    (event.activityTaskCompletedEventAttributes?.result?.payloads ?? []).map((payload) => JSON.parse(Buffer.from(payload.data ?? []).toString('utf8')) as unknown),
  );
}

async function workerStoppingWaits(): Promise<number> {
  const { values } = await started.harness.metrics.sendWaits.get();
  return values.filter((value) => value.labels.reason === 'worker_stopping').reduce((sum, value) => sum + value.value, 0);
}

it('leaves the worker as it stops, sends nothing there, and is sent once by the next worker', async () => {
  const { harness: h, receiver } = started;
  receiver.behave(() => 'hang');
  const holder = await createWebhookFor(h, receiver.url);
  await publishFor(h, holder.key.projectId);
  await receiver.waitForRequests(1);
  const waiter = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, waiter.key.projectId)).delivery_ids;
  await waitFor('the second send to wait for room in its activity', async () => {
    const described = await h.client.workflow.getHandle(deliveryId!).describe();
    return described.raw.pendingActivities?.some((activity) => activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED) ?? false;
  });

  // The stop drains the first send, whose request hangs; the waiting one leaves at once.
  const stopped = h.stopWorker();
  await waitFor('the waiting send to end with a wait for another worker', async () =>
    (await sendResults(deliveryId!)).some((result) => (result as { wait?: string }).wait === 'worker'),
  );
  expect(requestsFor(deliveryId!)).toHaveLength(0);
  expect(await workerStoppingWaits()).toBe(1);
  receiver.answerHanging(200);
  await stopped;

  receiver.behave(() => ({ status: 200 }));
  await h.startWorker();
  const delivered = await waitForDelivery(h, waiter.key.token, waiter.webhookId, deliveryId!, (delivery) => delivery.status === 'delivered');
  expect(delivered.attempt_count).toBe(1);
  expect(requestsFor(deliveryId!)).toHaveLength(1);
}, 90_000);

it('a manual retry while its send waits for room cancels that send before it makes an attempt', async () => {
  const { harness: h, receiver } = started;
  const before = receiver.requests.length;
  receiver.behave(() => 'hang');
  const holder = await createWebhookFor(h, receiver.url);
  await publishFor(h, holder.key.projectId);
  await receiver.waitForRequests(before + 1);
  const waiter = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, waiter.key.projectId)).delivery_ids;
  const handle = h.client.workflow.getHandle(deliveryId!);
  await waitFor('the send to wait for room in its activity', async () =>
    (await handle.describe()).raw.pendingActivities?.some((activity) => activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED) ?? false,
  );

  await handle.signal(retrySignal);
  await waitFor('the waiting send to end cancelled', async () =>
    ((await handle.fetchHistory()).events ?? []).some((event) => event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED),
  );
  expect(requestsFor(deliveryId!)).toHaveLength(0);

  receiver.behave(() => ({ status: 200 }));
  receiver.answerHanging(200);
  const delivered = await waitForDelivery(h, waiter.key.token, waiter.webhookId, deliveryId!, (delivery) => delivery.status === 'delivered');
  expect(delivered.attempt_count).toBe(1);
  expect(requestsFor(deliveryId!)).toHaveLength(1);
}, 90_000);
