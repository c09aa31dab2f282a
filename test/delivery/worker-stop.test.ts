import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { deliveries } from '../../src/db/schema.ts';
import type { DevServer } from '../../src/local/dev-server.ts';
import { startOwnDevServer } from '../support/dev-server.ts';
import { waitFor } from '../support/wait.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { createWebhookFor, publishFor } from './support.ts';

const REPORT_GIVEN_UP = 'could not report the end of a send attempt to Temporal';

let server: DevServer;
let h: Harness;
let receiver: HttpsReceiver;

beforeAll(async () => {
  // A dev server of this file's own: the test stops it under the worker.
  server = await startOwnDevServer();
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, temporalAddress: server.address, delivery: { caFile: receiver.certFile } });
}, 120_000);
afterAll(async () => {
  await receiver?.close();
  await server?.stop();
});

it('a stopping worker waits for its exchanges, not for a report to an unreachable Temporal, which it gives up instead of trying for another minute', async () => {
  receiver.behave(() => 'hang');
  const { key } = await createWebhookFor(h, receiver.url);
  const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids;
  await receiver.waitForRequests(1);

  // Temporal goes away while the send is out; then the endpoint answers. The attempt is recorded,
  // and its report to Temporal fails and is tried again.
  await server.stop();
  receiver.answerHanging(200);
  await waitFor('the attempt to be recorded', async () => {
    const [row] = await h.db.select({ status: deliveries.status }).from(deliveries).where(eq(deliveries.id, deliveryId!));
    return row?.status === 'delivered';
  });
  expect(h.logs.some((line) => line.includes(REPORT_GIVEN_UP))).toBe(false);

  await h.stop();
  // Its exchange had ended: the stop did not wait for the report, nor leave the send in flight.
  expect(h.logs.some((line) => line.includes('stopped with sends still in flight'))).toBe(false);
  // The tries left would go on for about a minute (1 + 2 + 4 + 8 + 16 + 32 s of pauses); a
  // stopped worker gives up at its next try instead.
  await waitFor('the report to be given up', () => h.logs.some((line) => line.includes(REPORT_GIVEN_UP)), { timeoutMs: 20_000 });
}, 120_000);
