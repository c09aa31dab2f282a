/**
 * Answers lost with their connection after the database committed the statement (a real TCP
 * connection closed between the commit and its answer), before a send's request goes out: the
 * send tries again as the same attempt. Its places, taken again, are the ones it was granted (it
 * does not wait for them to lapse, as if another attempt held them), and its attempt, opened
 * again, is the one already counted (no row that sent nothing is closed as timed out). (A record
 * tried again after a lost answer: one-attempt.test.ts.)
 */
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareAttempt } from '../../activities/attempt.ts';
import { openDatabase, queryRows, type DatabaseHandle } from '../../src/db/client.ts';
import { startAttempt } from '../../src/db/queries/deliveries.ts';
import { deliveries, deliveryAttempts } from '../../src/db/schema.ts';
import { createSender } from '../../src/delivery/sender.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { startAnswerLosingProxy, type AnswerLosingProxy } from '../support/answer-losing-proxy.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { attemptDepsFor } from '../support/delivery-activities.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';
import { createWebhookFor, publishFor, waitForDelivery } from './support.ts';

let database: SharedTestDatabase;
let proxy: AnswerLosingProxy;
let throughProxy: DatabaseHandle;
const box = new SecretBox(generateEncryptionKey());
const never = new AbortController().signal;
const sender = createSender({ timeoutMs: 1_000, allowPrivateTargets: true });

beforeAll(async () => {
  database = await openSharedTestDatabase();
  proxy = await startAnswerLosingProxy(database.url);
  throughProxy = await openDatabase({ kind: 'postgres', url: proxy.url, poolMax: 1 });
});
afterAll(async () => {
  sender.close();
  await throughProxy?.close();
  await proxy?.close();
  await database?.close();
});

let sequence = 0;
/** A delivery of a webhook of a project of its own. */
async function newDelivery(): Promise<string> {
  const project = await storedProject(database.db, `lost-answer-${(sequence += 1)}`);
  const { ids } = await webhookWithDeliveries(database.db, box, project, { url: 'https://127.0.0.1:1/hooks', count: 1 });
  return ids[0]!;
}

const attemptsOf = (deliveryId: string) =>
  database.db
    .select({ id: deliveryAttempts.id, attemptNumber: deliveryAttempts.attemptNumber, outcome: deliveryAttempts.outcome })
    .from(deliveryAttempts)
    .where(eq(deliveryAttempts.deliveryId, deliveryId));

it('a send whose attempt was opened but whose answer was lost opens that same attempt when it tries again', async () => {
  const deliveryId = await newDelivery();
  const deps = attemptDepsFor({ db: throughProxy.db, secretBox: box, sender });
  // The pool's one connection is open and idle: the next answer it gets is the attempt's.
  await queryRows(throughProxy.db, sql`select 1`);
  const lost = proxy.loseNextAnswer();
  const prepared = await prepareAttempt(deps, deliveryId, { until: performance.now() + 30_000, signal: never });
  await lost;

  expect(prepared).toMatchObject({ deliveryId, attemptNumber: 1 });
  const { attemptId } = prepared as Exclude<typeof prepared, string>;
  expect(await attemptsOf(deliveryId)).toEqual([{ id: attemptId, attemptNumber: 1, outcome: 'in_progress' }]);
  const [delivery] = await database.db.select().from(deliveries).where(eq(deliveries.id, deliveryId));
  expect(delivery).toMatchObject({ status: 'processing', attemptCount: 1 });
});

it('an attempt tried again after a newer attempt closed its row does not go out', async () => {
  const deliveryId = await newDelivery();
  const startedAt = new Date();
  const first = await startAttempt(database.db, box, deliveryId, startedAt);
  // Its worker was presumed dead: a newer attempt opens, closing the first one's row.
  const newer = await startAttempt(database.db, box, deliveryId, new Date());
  await expect(startAttempt(database.db, box, deliveryId, startedAt, first!.attempt!.attemptId)).rejects.toThrow(/closed by a newer attempt/);

  expect(await attemptsOf(deliveryId)).toEqual(
    expect.arrayContaining([
      { id: first!.attempt!.attemptId, attemptNumber: 1, outcome: 'timeout' },
      { id: newer!.attempt!.attemptId, attemptNumber: 2, outcome: 'in_progress' },
    ]),
  );
  const [delivery] = await database.db.select().from(deliveries).where(eq(deliveries.id, deliveryId));
  expect(delivery?.attemptCount).toBe(2);
});

describe('through the worker', () => {
  let h: Harness;
  let receiver: HttpsReceiver;
  let workerProxy: AnswerLosingProxy;
  let workerDatabase: DatabaseHandle;
  /** The statements the worker sent, as they went out. */
  const sent: string[] = [];

  beforeAll(async () => {
    receiver = await startHttpsReceiver();
    h = await startHarness({
      worker: true,
      delivery: { caFile: receiver.certFile },
      async workerDatabase(url) {
        workerProxy = await startAnswerLosingProxy(url);
        workerDatabase = await openDatabase({ kind: 'postgres', url: workerProxy.url, poolMax: 1 }, { onStatement: (text) => sent.push(text) });
        return workerDatabase.db;
      },
    });
  });
  afterAll(async () => {
    await h?.stop();
    await workerDatabase?.close();
    await workerProxy?.close();
    await receiver?.close();
  });

  it('a send whose places were granted but whose answer was lost takes them again: one activity, no wait', async () => {
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    await queryRows(workerDatabase.db, sql`select 1`);
    const armedAt = sent.length;
    const lost = workerProxy.loseNextAnswer();
    const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids as [string];
    await lost;
    // The answer lost was the places' grant: the first statement of the send, and the only one sent until then.
    expect(sent.slice(armedAt)).toEqual([expect.stringMatching(/acquire_send_places/)]);

    const delivery = await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'delivered');
    expect(delivery.attempt_count).toBe(1);
    expect(receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId)).toHaveLength(1);
    const events = (await h.client.workflow.getHandle(deliveryId).fetchHistory()).events ?? [];
    expect(events.filter((event) => event.activityTaskScheduledEventAttributes)).toHaveLength(1);
    expect(events.filter((event) => event.timerStartedEventAttributes)).toHaveLength(0);
  }, 60_000);
});
