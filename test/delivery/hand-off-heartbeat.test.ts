/**
 * A send's activity stays alive across the hand-off of its exchange to the worker's background,
 * however long it waited for room in its worker before: the server hears a heartbeat in time.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { temporal } from '@temporalio/proto';
import { expect, it } from 'vitest';
import { firstBackgroundHeartbeatMs, PREPARING_HEARTBEAT_MS } from '../../activities/background-sends.ts';
import { SEND_HEARTBEAT_TIMEOUT_MS } from '../../workflows/send-limits.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { createWebhookFor, publishFor, waitForDelivery } from './support.ts';

const { EventType } = temporal.api.enums.v1;

// Room for one send at a time in the worker (WORKER_MAX_SENDS_IN_FLIGHT): a second waits for it in its activity.
const started = harnessWithReceiver({ flow: { workerMaxInFlight: 1 } });

const requestsFor = (deliveryId: string) => started.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);

it('a send handed off after waiting for room in its worker is not timed out by its heartbeat timeout', async () => {
  const { harness: h, receiver } = started;
  // The first request of each delivery hangs until the test answers it; later ones are answered at once.
  receiver.behave((request) => (requestsFor(String(request.headers['x-service-delivery-id'])).length === 1 ? 'hang' : { status: 200 }));
  const holder = await createWebhookFor(h, receiver.url);
  await publishFor(h, holder.key.projectId);
  await receiver.waitForRequests(1);
  const waiter = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, waiter.key.projectId)).delivery_ids;
  // Its send waits for the worker's room, heartbeating in its activity, while the first request hangs.
  await sleep(4_000);
  receiver.answerHanging(200);
  await receiver.waitForRequests(2);
  // Handed off to the background, its request is answered after nearly the heartbeat timeout.
  await sleep(SEND_HEARTBEAT_TIMEOUT_MS - 1_000);
  receiver.answerHanging(200);
  await waitForDelivery(h, waiter.key.token, waiter.webhookId, deliveryId!, (delivery) => delivery.status === 'delivered');
  expect(requestsFor(deliveryId!)).toHaveLength(1);
  // The delivery is recorded before its activity's end is reported: its history is read once the workflow has ended.
  const workflow = h.client.workflow.getHandle(deliveryId!);
  await workflow.result();
  const history = (await workflow.fetchHistory()).events!.map((event) => event.eventType);
  expect(history).not.toContain(EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT);
  expect(history.filter((type) => type === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)).toHaveLength(1);
}, 90_000);

it('heartbeats at once after a late hand-off, and 80% of the timeout after the start after an early one', () => {
  expect(firstBackgroundHeartbeatMs(0)).toBe(SEND_HEARTBEAT_TIMEOUT_MS * 0.8);
  expect(firstBackgroundHeartbeatMs(300)).toBe(SEND_HEARTBEAT_TIMEOUT_MS * 0.8 - 300);
  expect(firstBackgroundHeartbeatMs(PREPARING_HEARTBEAT_MS)).toBe(0);
  expect(firstBackgroundHeartbeatMs(4_000)).toBe(0);
});
