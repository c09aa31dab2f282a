import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DevServer } from '../../src/local/dev-server.ts';
import { startOwnDevServer } from '../support/dev-server.ts';
import { retrySignal } from '../../workflows/delivery.ts';
import { waitFor } from '../support/wait.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { createWebhookFor, publishFor } from './support.ts';

/** A history this long makes the server suggest continue-as-new (its default is 4 Ki events). */
const SUGGEST_AT_EVENTS = 20;

let server: DevServer;
let h: Harness;
let receiver: HttpsReceiver;

beforeAll(async () => {
  // A dev server of this file's own, which suggests continue-as-new early; the run's server is
  // shared with the other files and keeps Temporal's defaults.
  server = await startOwnDevServer(['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${SUGGEST_AT_EVENTS}`]);
  receiver = await startHttpsReceiver();
  // Every request hangs: each round's attempt stays in flight until a retry interrupts it.
  receiver.behave(() => 'hang');
  h = await startHarness({ worker: true, temporalAddress: server.address, delivery: { caFile: receiver.certFile, timeoutMs: 60_000 } });
}, 120_000);
afterAll(async () => {
  // The receiver first: it ends the request still hanging, which the worker's stop would wait for.
  await receiver?.close();
  await h?.stop();
  await server?.stop();
});

it('retries that keep interrupting rounds continue the workflow as new instead of growing one history', async () => {
  const { key } = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids;
  const handle = h.client.workflow.getHandle(deliveryId!);
  const requestsFor = () => receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);
  await waitFor('the first attempt to be out', () => requestsFor().length === 1, { timeoutMs: 20_000, intervalMs: 50 });
  const firstRun = (await handle.describe()).runId;

  // Each retry cancels the attempt in flight and starts a round: about ten events a time, so a
  // few retries pass the suggestion.
  for (let retry = 1; retry <= 4; retry += 1) {
    await handle.signal(retrySignal);
    await waitFor(`attempt ${retry + 1} to be out`, () => requestsFor().length === retry + 1, { timeoutMs: 20_000, intervalMs: 50 });
  }

  const current = await handle.describe();
  expect(current.runId).not.toBe(firstRun);
  expect(current.status.name).toBe('RUNNING');
  const first = await h.client.workflow.getHandle(deliveryId!, firstRun).describe();
  expect(first.status.name).toBe('CONTINUED_AS_NEW');
  expect(first.historyLength).toBeLessThan(SUGGEST_AT_EVENTS * 2);
}, 120_000);
