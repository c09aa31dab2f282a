import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { deliveries } from '../../src/db/schema.ts';
import { MAX_DELIVERY_TIMEOUT_MS } from '../../workflows/send-limits.ts';
import type { DevServer } from '../../src/local/dev-server.ts';
import { waitFor } from '../support/wait.ts';
import { startOwnDevServer } from '../support/dev-server.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { createWebhookFor, publishFor } from './support.ts';

/** Signals one workflow execution may receive on this file's server. */
const SIGNAL_LIMIT = 3;

let server: DevServer;
let h: Harness;
let receiver: HttpsReceiver;

beforeAll(async () => {
  // A dev server of this file's own: Temporal refuses a workflow's signals past SIGNAL_LIMIT.
  server = await startOwnDevServer(['--dynamic-config-value', `history.maximumSignalsPerExecution=${SIGNAL_LIMIT}`]);
  receiver = await startHttpsReceiver();
  // The send that holds the line's place hangs while the line forms: no time limit cuts it short.
  h = await startHarness({
    worker: true,
    temporalAddress: server.address,
    flow: { breakerThreshold: 1 },
    delivery: { caFile: receiver.certFile, timeoutMs: MAX_DELIVERY_TIMEOUT_MS },
  });
}, 120_000);
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
  await server?.stop();
});

/** What a workflow's history shows of its waits for a turn and of the turn signals it received. */
async function turnsOf(deliveryId: string) {
  const { events } = await h.client.workflow.getHandle(deliveryId).fetchHistory();
  const results = (events ?? []).flatMap((event) => event.activityTaskCompletedEventAttributes?.result?.payloads ?? []);
  const waits = results.filter((payload) => {
    const result: unknown = JSON.parse(Buffer.from(payload.data ?? []).toString('utf8'));
    return typeof result === 'object' && result !== null && (result as { wait?: string }).wait === 'turn';
  }).length;
  const signals = (events ?? []).filter((event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'sendTurn').length;
  return { waits, signals };
}

/** The last event of a workflow's history so far. */
async function lastEventOf(deliveryId: string) {
  const { events } = await h.client.workflow.getHandle(deliveryId).fetchHistory();
  return events?.at(-1);
}

it('sends each woken delivery its turn signal once, even when Temporal refuses the signal of another woken with it', async () => {
  const status = async (deliveryId: string) =>
    (await h.db.select({ status: deliveries.status }).from(deliveries).where(eq(deliveries.id, deliveryId)))[0]?.status;
  receiver.behave(() => ({ status: 500 }));
  const { key } = await createWebhookFor(h, receiver.url);
  // The first delivery's first attempt fails: the circuit breaker opens, one send at a time.
  const [first] = (await publishFor(h, key.projectId)).delivery_ids;
  await receiver.waitForRequests(1);
  receiver.behave(() => 'hang');
  await receiver.waitForRequests(2);

  // Its next attempt holds the one place; five more wait in line for it.
  const waiting: string[] = [];
  for (let i = 0; i < 5; i += 1) waiting.push(...(await publishFor(h, key.projectId)).delivery_ids);
  for (const deliveryId of waiting) await waitFor(`${deliveryId} to wait for its turn`, async () => (await turnsOf(deliveryId)).waits >= 1);

  // The head of the line has used up its signals: Temporal will refuse the next one.
  const [refused, ...others] = waiting as [string, ...string[]];
  for (let i = 0; i < SIGNAL_LIMIT; i += 1) await h.client.workflow.getHandle(refused).signal('sendTurn');
  const refusal = await h.client.workflow.getHandle(refused).signal('sendTurn').then(() => undefined, (error: unknown) => error);
  expect(String((refusal as Error | undefined)?.cause)).toMatch(/limit for signal/);
  // Each signal made it ask again; it waits in line again before the place frees.
  await waitFor(`${refused} to wait again`, async () => (await lastEventOf(refused))?.timerStartedEventAttributes != null);

  // The send holding the place succeeds: the breaker closes and the line is woken, its head's
  // signal refused (the head comes back by itself, at its recheck). The sends of those woken hang
  // a while, so that their workflows are still open should a signal come again.
  const before = receiver.requests.length;
  receiver.answerHanging(200);
  await receiver.waitForRequests(before + 1, 60_000);
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  receiver.behave(() => ({ status: 200 }));
  receiver.answerHanging(200);
  // A woken delivery is sent at once; one a wake passed over (its row busy at that instant) comes
  // back at its own recheck, up to 5 minutes for one behind the head (this harness runs no repair
  // check): the bound here covers it, since what this test asserts is the signals, not the wait.
  for (const deliveryId of [first!, ...others]) {
    await waitFor(`${deliveryId} to be delivered`, async () => (await status(deliveryId)) === 'delivered', { timeoutMs: 330_000 });
  }
  // A refused signal is tried again on its own: nobody else receives a turn twice for one wait.
  for (const deliveryId of others) {
    const turns = await turnsOf(deliveryId);
    expect(turns.signals, `turn signals of ${deliveryId}, which waited ${turns.waits} time(s)`).toBeLessThanOrEqual(turns.waits);
  }
}, 600_000);
