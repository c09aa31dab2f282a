/**
 * The outage-recovery scenario, on either topology: customer endpoints down long enough to
 * dead-letter 2,000 deliveries across four webhooks, then back; one bulk retry per webhook
 * recovers them at BULK_RETRY_RATE while a worker is killed with SIGKILL mid-operation.
 */
import { and, eq, inArray } from 'drizzle-orm';
import { expect } from 'vitest';
import { ABANDONED_ATTEMPT_ERROR } from '../../src/db/queries/deliveries.ts';
import { deliveries, deliveryAttempts } from '../../src/db/schema.ts';
import { call } from '../support/http.ts';
import { DedupeReceiver } from './receiver.ts';
import type { ScenarioContext } from './scenario.ts';
import { waitFor } from '../support/wait.ts';
import { account, createWebhook, Publisher, report, statusCounts, waitUntilSettled, type Deployment, type ScenarioWebhook } from './workload.ts';

/** Webhooks (each with its own customer endpoint) and events per webhook: 4 x 500 = 2,000 dead letters. */
const WEBHOOKS = 4;
const EVENTS_PER_WEBHOOK = Number(process.env.FAULTS_OUTAGE_EVENTS ?? 500);
/** BULK_RETRY_RATE of the service: deliveries per second per operation at most; 4 x 8 = 32/s stays under what this machine delivers (about 40/s), and each step's own time keeps an operation under it (docs/performance.md, "The timer horizon"). */
export const OUTAGE_RETRY_RATE = 8;
const RATE = OUTAGE_RETRY_RATE;

/**
 * The environment the scenario's deployment runs with. This scenario is about recovering a backlog
 * of dead letters, and it builds that backlog at the retry schedule's pace, without flow control:
 * with the defaults, an open circuit breaker gives a refusing endpoint one attempt at a time, and
 * 500 deliveries due at once wait their turn for 10 places, which took the 10,000 failed attempts
 * 431 s (breaker) and 304 s (places alone) here, against the schedule's 15 s per round.
 */
export const OUTAGE_ENV = {
  BULK_RETRY_RATE: String(OUTAGE_RETRY_RATE),
  CIRCUIT_BREAKER_THRESHOLD: '1000',
  ENDPOINT_MAX_IN_FLIGHT: '1000',
};

interface Endpoint {
  receiver: DedupeReceiver;
  webhook: ScenarioWebhook;
  publisher?: Publisher;
  operationId?: string;
}

const operationOf = async (cluster: { apiUrls: readonly string[] }, endpoint: Endpoint) => {
  const answer = await call(`${cluster.apiUrls[0]}/api-gateway/v2/webhooks/${endpoint.webhook.webhookId}/operations/${endpoint.operationId}`, {
    method: 'GET',
    token: endpoint.webhook.token,
  });
  if (typeof answer === 'string' || answer.status !== 200) throw new Error(`operation: ${JSON.stringify(answer)}`);
  return answer.body.data as { id: string; status: string; matched: number; retried: number; skipped: number };
};

/** A worker SIGKILL and, where the topology wants it, its restart; returns when the service runs again. */
export type KillWorker = () => Promise<void>;

/**
 * Runs the scenario on `scenario`'s deployment (its own receiver and webhook are the first of
 * the four) and asserts: every delivery dead-lettered, then delivered, none lost; every operation
 * completed having retried all it matched; duplicates only from sends the SIGKILL cut; each
 * endpoint saw at most the configured rate.
 */
export async function outageRecovery(name: string, scenario: ScenarioContext<Deployment>, killWorker: KillWorker): Promise<void> {
  const extraReceivers: DedupeReceiver[] = [];
  try {
    await run(name, scenario, killWorker, extraReceivers);
  } finally {
    for (const receiver of extraReceivers) await receiver.close();
  }
}

async function run(name: string, scenario: ScenarioContext<Deployment>, killWorker: KillWorker, extraReceivers: DedupeReceiver[]): Promise<void> {
  const { cluster } = scenario;
  const endpoints: Endpoint[] = [{ receiver: scenario.receiver, webhook: scenario.webhook }];
  for (let i = 1; i < WEBHOOKS; i += 1) {
    const receiver = new DedupeReceiver(scenario.receiver);
    receiver.latencyMs = scenario.receiver.latencyMs;
    await receiver.start();
    extraReceivers.push(receiver);
    endpoints.push({ receiver, webhook: await createWebhook(cluster, receiver) });
  }

  // The outage: every endpoint refuses connections while the events come in, for longer than a
  // round of five attempts, so every delivery ends dead_letter.
  for (const endpoint of endpoints) await endpoint.receiver.stop();
  const startedAt = Date.now();
  for (const [i, endpoint] of endpoints.entries()) {
    endpoint.publisher = new Publisher({ cluster, webhook: endpoint.webhook, count: EVENTS_PER_WEBHOOK, ratePerSecond: 50, prefix: `outage-${i}` });
  }
  for (const endpoint of endpoints) {
    await waitUntilSettled(cluster, endpoint.webhook.webhookId, endpoint.publisher, { timeoutMs: 600_000, settled: ['dead_letter'] });
  }
  const deadLettered = (await Promise.all(endpoints.map((e) => statusCounts(cluster, e.webhook.webhookId)))).reduce(
    (sum, counts) => sum + (counts.dead_letter ?? 0),
    0,
  );
  expect(deadLettered).toBe(WEBHOOKS * EVENTS_PER_WEBHOOK);

  // The endpoints are back; one bulk call per webhook.
  for (const endpoint of endpoints) await endpoint.receiver.start();
  const upAt = Date.now();
  for (const endpoint of endpoints) {
    const answer = await call(`${cluster.apiUrls[0]}/api-gateway/v2/webhooks/${endpoint.webhook.webhookId}/deliveries/retry`, {
      token: endpoint.webhook.token,
      body: {},
    });
    if (typeof answer === 'string' || answer.status !== 202) throw new Error(`bulk retry: ${JSON.stringify(answer)}`);
    // The operation selects its deliveries in pages as it goes: `matched` grows to all of them.
    expect(answer.body.data).toMatchObject({ status: 'running' });
    endpoint.operationId = answer.body.data.id;
  }

  // The worker is killed in the middle of the operations, and restarted.
  await waitFor('a third of the retries signalled', async () => {
    const operations = await Promise.all(endpoints.map((e) => operationOf(cluster, e)));
    return operations.reduce((sum, op) => sum + op.retried, 0) >= (WEBHOOKS * EVENTS_PER_WEBHOOK) / 3;
  }, { timeoutMs: 300_000, intervalMs: 100 });
  const killedAt = Date.now();
  await killWorker();
  const restartedAt = Date.now();

  const operations = await waitFor(
    'every operation to complete',
    async () => {
      const ops = await Promise.all(endpoints.map((e) => operationOf(cluster, e)));
      return ops.every((op) => op.status !== 'running') ? ops : undefined;
    },
    { timeoutMs: 600_000, intervalMs: 500 },
  );
  let settledAt = 0;
  for (const endpoint of endpoints) {
    settledAt = Math.max(settledAt, (await waitUntilSettled(cluster, endpoint.webhook.webhookId, endpoint.publisher, { timeoutMs: 300_000 })).at);
  }

  const figures = await Promise.all(endpoints.map((e) => account(cluster, e.receiver, e.webhook, [e.publisher!])));
  // Duplicates can come only from sends the SIGKILL cut (the receiver recorded the request, the
  // dead worker never read the 2xx): at most the attempts closed as abandoned.
  const deliveryIds = (
    await cluster.db
      .select({ id: deliveries.id })
      .from(deliveries)
      .where(inArray(deliveries.webhookId, endpoints.map((e) => e.webhook.webhookId)))
  ).map((row) => row.id);
  const abandoned = await cluster.db
    .select({ id: deliveryAttempts.id })
    .from(deliveryAttempts)
    .where(and(inArray(deliveryAttempts.deliveryId, deliveryIds), eq(deliveryAttempts.error, ABANDONED_ATTEMPT_ERROR)));
  // The rate each endpoint saw while it recovered: sends per second, from its first to its last after the outage.
  const rates = endpoints.map((e) => {
    const receipts = e.receiver.receipts.filter((at) => at >= upAt);
    return (receipts.length - 1) / ((receipts.at(-1)! - receipts[0]!) / 1000);
  });
  const totals = {
    webhooks: WEBHOOKS,
    deadLettered,
    delivered: figures.reduce((sum, f) => sum + f.deliveries - f.lost, 0),
    lost: figures.reduce((sum, f) => sum + f.lost, 0),
    duplicates: figures.reduce((sum, f) => sum + f.duplicates, 0),
    abandonedSends: abandoned.length,
    invalidSignatures: figures.reduce((sum, f) => sum + f.invalidSignatures, 0),
    operations: operations.map(({ status, matched, retried, skipped }) => ({ status, matched, retried, skipped })),
    configuredRate: RATE,
    ratesSeenPerEndpoint: rates.map((rate) => Math.round(rate * 10) / 10),
    outageToAllDeadLetteredMs: upAt - startedAt,
    killAfterMs: killedAt - upAt,
    workerDownMs: restartedAt - killedAt,
    recoveryMs: settledAt - upAt,
    problems: figures.flatMap((f) => f.problems).slice(0, 20),
  };
  report(name, totals);

  expect(totals.problems).toEqual([]);
  expect(totals.lost).toBe(0);
  expect(totals.invalidSignatures).toBe(0);
  expect(operations.every((op) => op.status === 'completed' && op.matched === EVENTS_PER_WEBHOOK && op.retried === EVENTS_PER_WEBHOOK)).toBe(true);
  expect(totals.duplicates).toBeLessThanOrEqual(totals.abandonedSends);
  for (const rate of rates) expect(rate).toBeLessThanOrEqual(RATE * 1.15);
  expect(await cluster.unexpectedExits()).toEqual([]);
}
