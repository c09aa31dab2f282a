import { ScheduleOverlapPolicy } from '@temporalio/client';
import { eq, inArray, sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startAttempt } from '../../src/db/queries/deliveries.ts';
import { listUndispatchedEvents, markEventDispatched, recordEvent } from '../../src/db/queries/events.ts';
import { deliveries, deliveryAttempts } from '../../src/db/schema.ts';
import { acquireSendPlaces } from '../../src/flow-control/places.ts';
import { ensureRepairSchedule, repairScheduleId } from '../../src/temporal/schedules.ts';
import { ABANDONED_ATTEMPT_REASON, repairStuckDeliveries } from '../../src/repair/stuck-deliveries.ts';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from '../delivery/support.ts';
import { waitFor } from '../support/wait.ts';
import { docauthData, startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';

const MINUTE_MS = 60_000;
let h: Harness;
let receiver: HttpsReceiver;
/** Whether the receiver's endpoint `/failing` fails (500). */
let failing = true;

beforeAll(async () => {
  receiver = await startHttpsReceiver();
  receiver.behave((request) => (request.path.endsWith('/failing') && failing ? { status: 500 } : { status: 200 }));
  h = await startHarness({ worker: true, delivery: { caFile: receiver.certFile } });
});
afterAll(async () => {
  await h?.client.schedule.getHandle(repairScheduleId(h.taskQueue)).delete().catch(() => {});
  await h?.stop();
  await receiver?.close();
});
beforeEach(() => {
  failing = true;
});

const deps = () => ({ db: h.db, scheduler: h.scheduler, logger: h.logger, metrics: h.metrics });
const finishedDeadLetters = async () => (await h.metrics.deliveriesFinished.get()).values.find((value) => value.labels.status === 'dead_letter')?.value ?? 0;
const requestsFor = (deliveryId: string) => receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);
/** Makes deliveries look left as they are since `ms` ago. */
const age = (ids: string[], ms = 10 * MINUTE_MS) =>
  h.db.update(deliveries).set({ updatedAt: new Date(Date.now() - ms) }).where(inArray(deliveries.id, ids));

/** An event stored, its workflows never started (what a publish whose process died leaves), then marked dispatched as if the start had been lost. */
async function deliveryWithoutWorkflow(projectId: string, webhookId: string) {
  const stored = await recordEvent(h.db, h.secretBox, {
    projectId,
    event: 'docauth.completed',
    occurredAt: new Date(),
    payload: docauthData(),
    onlyWebhookId: webhookId,
  });
  await markEventDispatched(h.db, stored.event.id);
  return stored.deliveries[0]!.deliveryId;
}

/** A delivery to a failing endpoint, dead-lettered, its workflow waiting for a retry. */
async function deliveryWaitingInItsDeadLetter() {
  const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/failing`);
  const deliveryId = (await publishFor(h, key.projectId)).delivery_ids[0]!;
  await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'dead_letter', 60_000);
  // The workflow records the dead letter, then says so in its search attribute as it starts to wait.
  await waitFor('the workflow to wait in its dead letter', async () => (await h.scheduler.deliveryWorkflowState(deliveryId)) === 'waiting_for_retry', {
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  return { key, webhookId, deliveryId };
}

describe('the repair check', () => {
  it('sends a retry again whose signal never came, while the workflow still waits in its dead letter; a repeat does nothing more', async () => {
    const { key, webhookId, deliveryId } = await deliveryWaitingInItsDeadLetter();
    // A manual retry committed `pending`, and its process died before the signal (or a bulk retry
    // was cancelled between an item's commit and its signal).
    await h.db.update(deliveries).set({ status: 'pending', nextRetryAt: null }).where(eq(deliveries.id, deliveryId));
    await age([deliveryId]);
    failing = false;

    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({ pending_retry_lost: 1 });
    const delivered = await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'delivered');
    expect(delivered.attempt_count).toBe(6);
    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({});
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_repairs_total\{problem="pending_retry_lost"\} 1/);
  }, 90_000);

  it('dead-letters again a delivery left processing by an attempt that started after its round was dead-lettered', async () => {
    const { key, webhookId, deliveryId } = await deliveryWaitingInItsDeadLetter();
    // An attempt of a worker cut off from Temporal (its activity timed out, the round dead-lettered
    // elsewhere) starts late, and its worker dies before recording it: `processing`, which the
    // customer cannot retry, while the workflow waits for a retry.
    await startAttempt(h.db, h.secretBox, deliveryId, new Date());
    await age([deliveryId]);
    failing = false;

    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({ processing_after_dead_letter: 1 });
    const [row] = await h.db.select().from(deliveries).where(eq(deliveries.id, deliveryId));
    expect(row).toMatchObject({ status: 'dead_letter', lastError: ABANDONED_ATTEMPT_REASON });
    const retried = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`, { token: key.token });
    expect(retried.status).toBe(202);
    await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'delivered');
  }, 90_000);

  it('starts the workflow of a pending delivery that has none', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const deliveryId = await deliveryWithoutWorkflow(key.projectId, webhookId);
    // Young, it may still be starting: left alone.
    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({});
    await age([deliveryId]);

    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({ pending_without_workflow: 1 });
    await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'delivered');
    expect(requestsFor(deliveryId)).toHaveLength(1);
  });

  it('dead-letters a delivery whose attempt was left open by a workflow that no longer runs', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const deliveryId = await deliveryWithoutWorkflow(key.projectId, webhookId);
    await startAttempt(h.db, h.secretBox, deliveryId, new Date());
    await age([deliveryId]);
    const deadLettersBefore = await finishedDeadLetters();

    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({ processing_without_workflow: 1 });
    // Counted among the deliveries that reached a final status, as the workflow's dead letters are.
    expect(await finishedDeadLetters()).toBe(deadLettersBefore + 1);
    const [row] = await h.db.select().from(deliveries).where(eq(deliveries.id, deliveryId));
    expect(row).toMatchObject({ status: 'dead_letter', lastError: ABANDONED_ATTEMPT_REASON });
    const attempts = await h.db.select().from(deliveryAttempts).where(eq(deliveryAttempts.deliveryId, deliveryId));
    expect(attempts.map((attempt) => attempt.outcome)).toEqual(['timeout']);
    // Where the customer can act on it: a manual retry sends it.
    const retried = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`, { token: key.token });
    expect(retried.status).toBe(202);
    await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'delivered');
  });

  it('never touches a delivery waiting in line for a place, or holding one for a later start', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const holding = await deliveryWithoutWorkflow(key.projectId, webhookId);
    const waiting = await deliveryWithoutWorkflow(key.projectId, webhookId);
    const oneAtATime = { webhookMaxInFlight: 1, projectMaxInFlight: 10, destinationMaxInFlight: 10, holdMs: 60 * MINUTE_MS, reserveMs: MINUTE_MS };
    expect((await acquireSendPlaces(h.db, holding, 'run/a/1', oneAtATime)).decision).toBe('granted');
    expect((await acquireSendPlaces(h.db, waiting, 'run/b/1', oneAtATime)).decision).toBe('wait_turn');
    await age([holding, waiting], 60 * MINUTE_MS);

    expect(await repairStuckDeliveries(deps(), MINUTE_MS)).toEqual({});
    const rows = await h.db.select({ status: deliveries.status }).from(deliveries).where(inArray(deliveries.id, [holding, waiting]));
    expect(rows.map((row) => row.status)).toEqual(['pending', 'pending']);
    expect(await h.client.workflow.getHandle(waiting).describe().catch(() => 'none')).toBe('none');
    await h.db.execute(sql`delete from send_places where delivery_id in (${holding}, ${waiting})`);
    await h.db.execute(sql`delete from send_waiters where delivery_id in (${holding}, ${waiting})`);
    await h.db.delete(deliveries).where(inArray(deliveries.id, [holding, waiting]));
  });

  it("starts undispatched events fairly: one project's many do not hold back another's", async () => {
    const many = await createWebhookFor(h, receiver.url);
    const one = await createWebhookFor(h, receiver.url);
    const store = (projectId: string) =>
      recordEvent(h.db, h.secretBox, { projectId, event: 'docauth.completed', occurredAt: new Date(Date.now() - MINUTE_MS), payload: docauthData() });
    for (let i = 0; i < 12; i += 1) await store(many.key.projectId);
    const lone = await store(one.key.projectId);
    // A second ahead: an event stored in this very millisecond is not before `new Date()`.
    const listed = await listUndispatchedEvents(h.db, new Date(Date.now() + 1_000), 5, 3);
    expect(listed.filter(({ event }) => event.projectId === many.key.projectId)).toHaveLength(3);
    expect(listed.map(({ event }) => event.id)).toContain(lone.event.id);
  });

  it('runs as a Temporal Schedule: one schedule however many replicas start, one run at a time', async () => {
    await ensureRepairSchedule(h.client, { taskQueue: h.taskQueue, intervalMs: 60_000, undispatchedAfterMs: 10_000, staleAfterMs: 5 * MINUTE_MS });
    await ensureRepairSchedule(h.client, { taskQueue: h.taskQueue, intervalMs: 30_000, undispatchedAfterMs: 10_000, staleAfterMs: 2 * MINUTE_MS });
    const schedule = h.client.schedule.getHandle(repairScheduleId(h.taskQueue));
    const described = await schedule.describe();
    expect(described.spec.intervals).toMatchObject([{ every: 30_000 }]);
    expect(described.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
    expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'repairWorkflow', taskQueue: h.taskQueue });

    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const deliveryId = await deliveryWithoutWorkflow(key.projectId, webhookId);
    await age([deliveryId]);
    await schedule.trigger();
    let started: { workflowId: string } | undefined;
    for (let i = 0; i < 100 && !started; i += 1) {
      const action = (await schedule.describe()).info.recentActions[0]?.action;
      started = action?.type === 'startWorkflow' ? action.workflow : undefined;
      if (!started) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const result = await h.client.workflow.getHandle(started!.workflowId).result();
    expect(result.deliveriesRepaired).toMatchObject({ pending_without_workflow: 1 });
    await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'delivered');
  }, 60_000);
});
