/**
 * The workload of a fault scenario and its accounting: a producer that publishes a batch of
 * events through the HTTP door with its own ids (retrying an unanswered or failed call with
 * the same id, as a producer should), the wait for every delivery to land, and the checks
 * that the database agrees with what the receiver saw.
 */
import { randomUUID } from 'node:crypto';
import { count, eq, inArray, sql, sum } from 'drizzle-orm';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { ABANDONED_ATTEMPT_ERROR } from '../../src/db/queries/deliveries.ts';
import { CANCELLED_ATTEMPT_ERROR } from '../../src/delivery/sender.ts';
import { deliveries, deliveryAttempts, events, webhooks } from '../../src/db/schema.ts';
import { docauthData as sharedDocauthData } from '../support/event-data.ts';
import { queryRows, type Database } from '../../src/db/client.ts';
import { call, isV2ErrorBody, type NoAnswer } from '../support/http.ts';
import type { DedupeReceiver } from './receiver.ts';
import { deadlineIn, sleep, waitFor } from '../support/wait.ts';

/** What the workload needs of the service under test, whichever topology runs it. */
export interface Deployment {
  /** Base URLs of the API replicas; the producer spreads its calls over them as a load balancer would. */
  readonly apiUrls: readonly string[];
  /** The test's own connection to the service's database (for keys and for polling). */
  readonly db: Database;
  /** Creates an API key and a producer key of a fresh project straight in the database. */
  createKey(): Promise<ScenarioKeys>;
  /** Processes that died without the scenario killing or stopping them. */
  unexpectedExits(): string[] | Promise<string[]>;
  /** What the worker processes logged so far, where the topology keeps it: shown when a wait fails. */
  logs?(role: 'worker'): Promise<string>;
}

// ---------------------------------------------------------------------------------------------
// Set-up

/** A fresh project's keys: an API key (`token`) and a producer key, which publishes for this project only. */
export interface ScenarioKeys {
  id: string;
  projectId: string;
  token: string;
  producerKey: string;
}

/** The keys of a fresh project, made straight in the database as `npm run cli -- keys create` does. */
export async function createScenarioKeys(db: Database, projectId: string): Promise<ScenarioKeys> {
  const { key, token } = await createApiKey(db, { projectId, services: ['webhooks'] });
  const producer = await createApiKey(db, { projectId, services: ['events'] });
  return { id: key.id, projectId, token, producerKey: producer.token };
}

export interface ScenarioWebhook {
  projectId: string;
  token: string;
  producerKey: string;
  webhookId: string;
}

/**
 * A webhook on the receiver, created through the v2 API: of a fresh project, or of the project
 * of `keys`; at the receiver's URL, or at that URL followed by `path` (several webhooks on one endpoint).
 */
export async function createWebhook(
  cluster: Deployment,
  receiver: DedupeReceiver,
  { keys, path = '' }: { keys?: ScenarioKeys; path?: string } = {},
): Promise<ScenarioWebhook> {
  const key = keys ?? (await cluster.createKey());
  const answer = await call(`${cluster.apiUrls[0]}/api-gateway/v2/webhooks`, {
    token: key.token,
    body: { api_key_id: key.id, url: `${receiver.url}${path}`, events: ['docauth.completed'] },
  });
  if (typeof answer === 'string' || answer.status !== 201) {
    throw new Error(`webhook creation failed: ${JSON.stringify(answer)}`);
  }
  receiver.trust(answer.body.data.secret);
  return { projectId: key.projectId, token: key.token, producerKey: key.producerKey, webhookId: answer.body.data.id };
}

// ---------------------------------------------------------------------------------------------
// Publishing

/** What happened to one event on the producer's side. */
export interface PublishRecord {
  id: string;
  tries: number;
  /** Outcome of every try: an HTTP status or a {@link NoAnswer}. */
  outcomes: (number | NoAnswer)[];
  /** Set once a try got the 202. */
  accepted?: { eventId: string; deliveryIds: string[]; at: number };
  /** Non-202 answers whose body was not the v2 error body. */
  malformedErrors: number;
}

export interface PublisherOptions {
  cluster: Deployment;
  webhook: ScenarioWebhook;
  count: number;
  /** Calls in flight at once. */
  concurrency?: number;
  /** Paces first tries to this many events per second (so the damage lands mid-run). */
  ratePerSecond?: number;
  /** How long one event is retried before the producer gives up. */
  giveUpAfterMs?: number;
  /** Prefix of the producer ids. */
  prefix?: string;
  /**
   * Publish again after a 5xx answer (default). When false the producer gives up on a 5xx
   * (it still retries calls that got no answer): what the service committed before failing
   * must then be delivered by the repair check alone.
   */
  retryServerErrors?: boolean;
}

/** A producer publishing a batch in the background; `done` resolves when every event is settled. */
export class Publisher {
  readonly records: PublishRecord[];
  readonly done: Promise<void>;
  #accepted = 0;
  #inFlight = 0;
  #paced = true;
  readonly startedAt = Date.now();
  finishedAt: number | undefined;

  private readonly options: PublisherOptions;

  constructor(options: PublisherOptions) {
    this.options = options;
    const prefix = options.prefix ?? `evt-${randomUUID().slice(0, 8)}`;
    this.records = Array.from({ length: options.count }, (_, i) => ({
      id: `${prefix}-${String(i).padStart(5, '0')}`,
      tries: 0,
      outcomes: [],
      malformedErrors: 0,
    }));
    this.done = this.#run().finally(() => {
      this.finishedAt = Date.now();
    });
  }

  get accepted(): number {
    return this.#accepted;
  }

  get givesUpOnServerErrors(): boolean {
    return this.options.retryServerErrors === false;
  }

  /** Calls sent and not answered yet. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Drops the pacing: every lane publishes back to back from now on, so calls pile up in flight. */
  surge(): void {
    this.#paced = false;
  }

  /** Resolves once `n` events have been accepted (202). */
  whenAccepted(n: number, timeoutMs = 120_000): Promise<number> {
    return waitFor(`${n} accepted events`, () => this.#accepted >= n && this.#accepted, { timeoutMs, intervalMs: 20 });
  }

  async #run(): Promise<void> {
    const { concurrency = 16, ratePerSecond } = this.options;
    let next = 0;
    const lane = async () => {
      for (;;) {
        const index = next;
        next += 1;
        if (index >= this.records.length) return;
        if (ratePerSecond && this.#paced) {
          const due = this.startedAt + (index * 1000) / ratePerSecond;
          if (due > Date.now()) await sleep(due - Date.now());
        }
        await this.#publish(this.records[index]!, index);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
  }

  async #publish(record: PublishRecord, index: number): Promise<void> {
    const { cluster, webhook, giveUpAfterMs = 180_000 } = this.options;
    const body = {
      id: record.id,
      project_id: webhook.projectId,
      event: 'docauth.completed',
      data: docauthData(record.id),
    };
    const giveUpAt = deadlineIn(giveUpAfterMs);
    for (let backoff = 250; ; backoff = Math.min(backoff * 2, 2_000)) {
      record.tries += 1;
      this.#inFlight += 1;
      // Round robin over the replicas; a retry goes to the next one.
      const apiUrl = cluster.apiUrls[(index + record.tries - 1) % cluster.apiUrls.length];
      const answer = await call(`${apiUrl}/internal/v1/events`, { token: webhook.producerKey, body }).finally(() => {
        this.#inFlight -= 1;
      });
      if (typeof answer === 'string') {
        record.outcomes.push(answer);
      } else {
        record.outcomes.push(answer.status);
        if (answer.status === 202) {
          record.accepted = { eventId: answer.body.data.event_id, deliveryIds: answer.body.data.delivery_ids, at: Date.now() };
          this.#accepted += 1;
          return;
        }
        if (!isV2ErrorBody(answer.body)) record.malformedErrors += 1;
        if (answer.status < 500) return; // a 4xx is final: nothing to retry
        if (this.options.retryServerErrors === false) return;
      }
      if (giveUpAt.passed()) return;
      await sleep(backoff);
    }
  }
}

/** A valid `docauth.completed` data object for the event `requestId`. */
export function docauthData(requestId: string) {
  return sharedDocauthData({ request_id: requestId, session_id: 'sess-faults' });
}

// ---------------------------------------------------------------------------------------------
// Waiting

export type StatusCounts = Partial<Record<(typeof deliveries.$inferSelect)['status'], number>> & { total: number; attempts: number };

/** Delivery counts by status for the webhook (or all the webhooks given), and their attempts (throws while the database is down). */
export async function statusCounts(cluster: Pick<Deployment, 'db'>, webhookIds: string | readonly string[]): Promise<StatusCounts> {
  const rows = await cluster.db
    .select({ status: deliveries.status, n: count(), attempts: sum(deliveries.attemptCount) })
    .from(deliveries)
    .where(typeof webhookIds === 'string' ? eq(deliveries.webhookId, webhookIds) : inArray(deliveries.webhookId, [...webhookIds]))
    .groupBy(deliveries.status);
  const counts: StatusCounts = { total: 0, attempts: 0 };
  for (const row of rows) {
    counts[row.status] = row.n;
    counts.total += row.n;
    counts.attempts += Number(row.attempts ?? 0);
  }
  return counts;
}

/**
 * Waits until the publisher has settled and every delivery of the webhook is `delivered`
 * (or in one of `settled`), polling the database; returns when that happened.
 */
export async function waitUntilSettled(
  cluster: Deployment,
  webhookId: string,
  publisher: Publisher | undefined,
  { timeoutMs = 180_000, settled = ['delivered'] }: { timeoutMs?: number; settled?: string[] } = {},
): Promise<{ at: number; counts: StatusCounts }> {
  let last: StatusCounts | undefined;
  try {
    return await waitFor(
      'every delivery to settle',
      async () => {
        if (publisher && publisher.finishedAt === undefined) return undefined;
        const counts = await statusCounts(cluster, webhookId);
        last = counts;
        const expected = publisher?.records.reduce((n, r) => n + (r.accepted?.deliveryIds.length ?? 0), 0) ?? 0;
        const done = settled.reduce((n, status) => n + (counts[status as keyof StatusCounts] ?? 0), 0);
        return counts.total >= expected && done === counts.total ? { at: Date.now(), counts } : undefined;
      },
      { timeoutMs, intervalMs: 250 },
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}; last counts ${JSON.stringify(last)}${await unsettledReport(cluster, webhookId, settled)}`);
  }
}

/** For a failed wait: a few deliveries not settled, with the send places and line entries they hold and whether their event was dispatched, the processes that died unasked, and the worker's last log lines. */
async function unsettledReport(cluster: Deployment, webhookId: string, settled: string[]): Promise<string> {
  try {
    const stuck = await queryRows(
      cluster.db,
      sql`select d.id, d.status, d.attempt_count, d.last_error, d.next_retry_at, d.updated_at,
            (select count(*)::int from send_places p where p.delivery_id = d.id) as places,
            (select count(*)::int from send_waiters w where w.delivery_id = d.id) as in_line,
            (select e.dispatched_at from events e where e.id = d.event_id) as event_dispatched_at
          from deliveries d
          where d.webhook_id = ${webhookId} and d.status not in ${[...settled]}
          order by d.updated_at limit 5`,
    );
    const workerLog = cluster.logs ? (await cluster.logs('worker')).trimEnd().split('\n').slice(-40).join('\n') : '(not kept by this topology)';
    const exits = await cluster.unexpectedExits();
    return `\nunsettled (oldest first): ${JSON.stringify(stuck)}\nprocesses that died: ${exits.length ? exits.join('; ') : 'none'}\nthe worker's last log lines:\n${workerLog}`;
  } catch (error) {
    return `\n(no report of the unsettled deliveries: ${String(error)})`;
  }
}

// ---------------------------------------------------------------------------------------------
// Accounting

export interface Accounting {
  events: number;
  accepted: number;
  deliveries: number;
  lost: number;
  duplicates: number;
  invalidSignatures: number;
  /** Event ids published, unanswered at least once, then published again with the same id. */
  republishedAfterNoAnswer: number;
  /** Deliveries with at least one failed attempt. */
  retried: number;
  /** Events the producer gave up on after a 5xx (only when it does not retry those). */
  rejected: number;
  /** Of those, the ones the service had committed anyway: they must be delivered too. */
  rejectedButStored: number;
  /** Problems found; the scenario asserts there are none. */
  problems: string[];
}

/**
 * Compares what the producer was told, what the database holds and what the receiver saw.
 * What must hold, whatever the fault:
 * - every published event was accepted (202) in the end, and its 202 named the deliveries the database has;
 * - the database has exactly the events published (one per producer id);
 * - every delivery is `delivered` with `delivered_at`, and the receiver saw it with a valid signature (lost = 0);
 * - the receiver saw no delivery id the database does not have;
 * - per delivery: one attempt row per counted attempt; attempt_count >= the sends the receiver saw
 *   (each send is counted before it goes out); 1 <= succeeded attempts <= sends seen (a 2xx
 *   attempt row exists only for an answered send); no attempt row left open;
 * - the webhook's counters equal the attempt rows (updated in the same transactions).
 */
export async function account(
  cluster: Deployment,
  receiver: DedupeReceiver,
  webhook: ScenarioWebhook,
  publishers: Publisher[],
): Promise<Accounting> {
  const problems: string[] = [];
  const records = publishers.flatMap((publisher) => publisher.records);
  const accepted = records.filter((record) => record.accepted);
  const rejected = new Set<string>();
  for (const record of records) {
    const finalOutcome = record.outcomes.at(-1);
    const gaveUpOnServerError = typeof finalOutcome === 'number' && finalOutcome >= 500;
    if (!record.accepted && gaveUpOnServerError && publishers.some((p) => p.records.includes(record) && p.givesUpOnServerErrors)) {
      rejected.add(record.id);
    } else if (!record.accepted) {
      problems.push(`event ${record.id} was never accepted: ${record.outcomes.join(',')}`);
    }
    if (record.malformedErrors > 0) problems.push(`event ${record.id}: ${record.malformedErrors} error answers without the v2 error body`);
  }

  const eventRows = await cluster.db.select().from(events).where(eq(events.projectId, webhook.projectId));
  const deliveryRows = await cluster.db.select().from(deliveries).where(eq(deliveries.webhookId, webhook.webhookId));
  const attemptRows =
    deliveryRows.length === 0
      ? []
      : await cluster.db
          .select()
          .from(deliveryAttempts)
          .where(inArray(deliveryAttempts.deliveryId, deliveryRows.map((row) => row.id)));
  const [webhookRow] = await cluster.db.select().from(webhooks).where(eq(webhooks.id, webhook.webhookId));

  const published = new Set(records.map((record) => record.id));
  const eventByProducerId = new Map(eventRows.map((row) => [row.producerEventId, row]));
  if (eventRows.length !== eventByProducerId.size) problems.push('two events share a producer id');
  for (const row of eventRows) {
    if (!published.has(row.producerEventId)) problems.push(`event ${row.producerEventId} in the database was never published`);
  }
  const deliveriesByEvent = new Map<string, string[]>();
  for (const row of deliveryRows) deliveriesByEvent.set(row.eventId, [...(deliveriesByEvent.get(row.eventId) ?? []), row.id]);
  for (const record of accepted) {
    const row = eventByProducerId.get(record.id);
    if (!row) {
      problems.push(`accepted event ${record.id} is not in the database`);
      continue;
    }
    const stored = (deliveriesByEvent.get(row.id) ?? []).sort().join(',');
    if (row.id !== record.accepted!.eventId || stored !== [...record.accepted!.deliveryIds].sort().join(',')) {
      problems.push(`the 202 of ${record.id} does not match the database`);
    }
    if (record.accepted!.deliveryIds.length !== 1) problems.push(`event ${record.id} has ${record.accepted!.deliveryIds.length} deliveries, expected 1`);
  }

  const deliveryIds = new Set(deliveryRows.map((row) => row.id));
  const acceptedDeliveryIds = new Set(accepted.flatMap((record) => record.accepted!.deliveryIds));
  const lost = new Set(
    [...acceptedDeliveryIds, ...deliveryIds].filter((id) => !receiver.seen.has(id)),
  );
  for (const id of lost) problems.push(`delivery ${id} never reached the receiver`);
  for (const id of receiver.seen.keys()) {
    if (!deliveryIds.has(id)) problems.push(`the receiver saw ${id}, which is no delivery of the webhook`);
  }

  const attemptsByDelivery = new Map<string, (typeof attemptRows)[number][]>();
  for (const row of attemptRows) attemptsByDelivery.set(row.deliveryId, [...(attemptsByDelivery.get(row.deliveryId) ?? []), row]);
  let succeeded = 0;
  let failed = 0;
  let retried = 0;
  for (const row of deliveryRows) {
    const sends = receiver.seen.get(row.id)?.count ?? 0;
    const attempts = attemptsByDelivery.get(row.id) ?? [];
    const wins = attempts.filter((a) => a.outcome === 'succeeded').length;
    // Attempts closed by the service (abandoned, or cancelled) count nowhere against the endpoint.
    const losses = attempts.filter(
      (a) => a.outcome !== 'succeeded' && a.outcome !== 'in_progress' && a.error !== ABANDONED_ATTEMPT_ERROR && a.error !== CANCELLED_ATTEMPT_ERROR,
    ).length;
    const open = attempts.filter((a) => a.outcome === 'in_progress').length;
    succeeded += wins;
    failed += losses;
    if (attempts.some((a) => a.outcome !== 'succeeded')) retried += 1;
    const where = `delivery ${row.id}`;
    if (row.status !== 'delivered' || !row.deliveredAt) problems.push(`${where} is ${row.status}`);
    if (attempts.length !== row.attemptCount) problems.push(`${where}: attempt_count ${row.attemptCount} but ${attempts.length} attempt rows`);
    if (row.attemptCount < sends) problems.push(`${where}: attempt_count ${row.attemptCount} < ${sends} sends received`);
    if (wins < 1 || wins > sends) problems.push(`${where}: ${wins} succeeded attempts for ${sends} sends received`);
    if (open > 0) problems.push(`${where}: ${open} attempt rows still in_progress`);
  }
  if (webhookRow?.successCount !== succeeded) problems.push(`success_count ${webhookRow?.successCount} != ${succeeded} succeeded attempts`);
  if (webhookRow?.failureCount !== failed) problems.push(`failure_count ${webhookRow?.failureCount} != ${failed} failed attempts`);
  if (receiver.invalid.length > 0) problems.push(`${receiver.invalid.length} requests failed verification: ${JSON.stringify(receiver.invalid.slice(0, 5))}`);

  return {
    events: records.length,
    accepted: accepted.length,
    deliveries: deliveryRows.length,
    lost: lost.size,
    duplicates: receiver.duplicates,
    invalidSignatures: receiver.invalid.length,
    republishedAfterNoAnswer: records.filter((r) => r.outcomes.some((o) => o === 'unanswered' || o === 'timeout')).length,
    retried,
    rejected: rejected.size,
    rejectedButStored: eventRows.filter((row) => rejected.has(row.producerEventId)).length,
    problems,
  };
}

/** Logs the one-line JSON summary of a scenario. */
export function report(scenario: string, figures: Record<string, unknown>): void {
  console.log(`FAULT-SUMMARY ${JSON.stringify({ scenario, ...figures })}`);
}
