import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from './db/client.ts';
import type { AttemptOutcome } from './db/queries/deliveries.ts';
import { SEND_SCOPE_LEVELS } from './db/schema.ts';
import { readScrapedFigures, type DefaultSendLimits, type ScrapedFigures } from './db/queries/scrape.ts';

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DELIVERY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600];

/** How an attempt is labelled in metrics: the status class, or the kind of failure. */
export type AttemptOutcomeLabel = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'network' | 'refused';

export function attemptOutcomeLabel(outcome: AttemptOutcome, statusCode: number | undefined): AttemptOutcomeLabel {
  if (outcome === 'timeout') return 'timeout';
  if (outcome === 'refused') return 'refused';
  if (outcome === 'network_error' || statusCode === undefined) return 'network';
  if (statusCode >= 500) return '5xx';
  if (statusCode >= 400) return '4xx';
  if (statusCode >= 300) return '3xx';
  return '2xx';
}

/** How long a scrape waits for the database's figures before it reports the database down. */
const SCRAPE_QUERY_TIMEOUT_MS = 3_000;

/**
 * A reader of {@link ScrapedFigures} for the gauges of one scrape: the gauges collected together
 * share one read, and a read still running (a slow database) is joined, never started again, so
 * scrapes add at most one statement at a time. Resolves undefined when the database did not
 * answer within {@link SCRAPE_QUERY_TIMEOUT_MS}.
 */
function scrapeReader(db: Database, limits: DefaultSendLimits): () => Promise<ScrapedFigures | undefined> {
  let query: Promise<ScrapedFigures> | undefined;
  let scrape: Promise<ScrapedFigures | undefined> | undefined;
  const read = async (): Promise<ScrapedFigures | undefined> => {
    query ??= readScrapedFigures(db, limits).finally(() => (query = undefined));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), SCRAPE_QUERY_TIMEOUT_MS)));
    try {
      return await Promise.race([query, timeout]);
    } catch {
      return undefined;
    } finally {
      clearTimeout(timer);
      scrape = undefined;
    }
  };
  return () => (scrape ??= read());
}

/**
 * Gauges read from the database at each scrape. The installation-wide ones (breakers, outbox)
 * are the same in every replica: aggregate them with `max`, never `sum`. They are NaN when the
 * database did not answer; `webhook_database_up` says so for this process.
 */
function registerDatabaseGauges({ db, limits }: DatabaseFigures, registers: Registry[]): void {
  const scrape = scrapeReader(db, limits);
  const figureGauge = (name: string, help: string, figure: (figures: ScrapedFigures) => number) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        const figures = await scrape();
        this.set(figures ? figure(figures) : Number.NaN);
      },
    });
  new Gauge({
    name: 'webhook_database_up',
    help: `1 when the database answered this scrape's read within ${SCRAPE_QUERY_TIMEOUT_MS / 1000} s, 0 otherwise (this process's view)`,
    registers,
    async collect() {
      this.set((await scrape()) ? 1 : 0);
    },
  });
  figureGauge(
    'webhook_circuit_breakers_open',
    'Active webhooks whose circuit breaker is open now, from the database (the same in every replica: aggregate with max)',
    (figures) => figures.openCircuits,
  );
  figureGauge(
    'webhook_circuit_breaker_oldest_open_seconds',
    'Seconds since the longest-open circuit breaker of an active webhook opened, 0 when none is open (the same in every replica: aggregate with max)',
    (figures) => figures.oldestOpenCircuitSeconds,
  );
  figureGauge(
    'webhook_events_undispatched',
    "Accepted events whose delivery workflows are not all started yet; the repair check starts those older than 10 s (the same in every replica: aggregate with max)",
    (figures) => figures.undispatchedEvents,
  );
  figureGauge(
    'webhook_sends_in_flight',
    'Sends in flight in the whole installation, every worker replica (the same in every replica: aggregate with max)',
    (figures) => figures.sendsInFlight,
  );
  const levelGauge = (name: string, help: string, figure: (figures: ScrapedFigures) => Record<string, number>) =>
    new Gauge({
      name,
      help,
      labelNames: ['level'] as const,
      registers,
      async collect() {
        const figures = await scrape();
        for (const level of SEND_SCOPE_LEVELS) this.set({ level }, figures ? figure(figures)[level]! : Number.NaN);
      },
    });
  levelGauge(
    'webhook_send_scopes_at_capacity',
    'Webhooks, projects and destinations (level) whose send places are all held now: ENDPOINT_, PROJECT_ and DESTINATION_MAX_IN_FLIGHT or the operator\'s limit (the same in every replica: aggregate with max)',
    (figures) => figures.scopesAtCapacity,
  );
  levelGauge(
    'webhook_sends_waiting',
    "Deliveries waiting for a send place, by the level whose places are all held: their webhook's, project's or destination's (the same in every replica: aggregate with max)",
    (figures) => figures.sendsWaiting,
  );
  figureGauge(
    'webhook_events_undispatched_oldest_seconds',
    'Seconds since the oldest accepted event whose delivery workflows are not all started was accepted, 0 when none (the same in every replica: aggregate with max)',
    (figures) => figures.oldestUndispatchedSeconds,
  );
}

/**
 * The service's Prometheus metrics, in one registry per process. Labels are bounded
 * (status classes, route patterns): never a webhook, delivery or project id. Given the
 * process's `database`, the registry also has the gauges read from it at each scrape
 * (breakers open, the outbox, whether the database answers).
 */
export function createMetrics(options: { database?: DatabaseFigures } = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  if (options.database) registerDatabaseGauges(options.database, registers);
  let workerSends: { readonly size: number } | undefined;
  new Gauge({
    name: 'webhook_worker_sends_in_flight',
    help: "Sends this worker process has in flight: their HTTP exchanges run in the background and hold no worker slot (sum over replicas)",
    registers,
    collect() {
      this.set(workerSends?.size ?? 0);
    },
  });
  const sendsCapacity = new Gauge({
    name: 'webhook_worker_sends_capacity',
    help: 'Sends this worker process may have in flight at most (WORKER_MAX_SENDS_IN_FLIGHT); past it, send activities wait in their slots',
    registers,
  });
  return {
    registry,
    /** Reports the sends of this process's worker in `webhook_worker_sends_in_flight` and `_capacity`. */
    trackSendsInFlight(sends: { readonly size: number; readonly capacity: number }) {
      sendsCapacity.set(sends.capacity);
      workerSends = sends;
    },
    eventsAccepted: new Counter({
      name: 'webhook_events_accepted_total',
      help: 'Events accepted from producers (repeats of a known producer id not counted)',
      registers,
    }),
    deliveriesFinished: new Counter({
      name: 'webhook_deliveries_finished_total',
      help: 'Deliveries that reached a final status (delivered, dead_letter); a manual retry can finish one again',
      labelNames: ['status'] as const,
      registers,
    }),
    attempts: new Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Delivery attempts by outcome: 2xx, 3xx, 4xx, 5xx, timeout, network, refused',
      labelNames: ['outcome'] as const,
      registers,
    }),
    attemptDuration: new Histogram({
      name: 'webhook_delivery_attempt_duration_seconds',
      help: 'Duration of one POST to a customer endpoint',
      labelNames: ['outcome'] as const,
      buckets: SECONDS_BUCKETS,
      registers,
    }),
    webhooksAutoDisabled: new Counter({
      name: 'webhook_auto_disabled_total',
      help: 'Webhooks the service disabled because every attempt failed for WEBHOOK_AUTO_DISABLE_AFTER',
      registers,
    }),
    circuitTransitions: new Counter({
      name: 'webhook_circuit_transitions_total',
      help: "Circuit breaker changes of state: opened (CIRCUIT_BREAKER_THRESHOLD attempts in a row failed) or closed (an attempt succeeded)",
      labelNames: ['state'] as const,
      registers,
    }),
    sendWaits: new Counter({
      name: 'webhook_send_waits_total',
      help: "Sends that waited instead of starting (no attempt used): webhook_busy, project_busy, destination_busy (all its places at that level in use: ENDPOINT_MAX_IN_FLIGHT, or one while its circuit is open; PROJECT_ and DESTINATION_MAX_IN_FLIGHT or the operator's limit), rate_limit (the webhook's rate_limit), recovery_pace (a send of an endpoint's backlog waits for its start on its project's recovery schedule, PROJECT_RECOVERY_RATE), breaker_probe (the webhook's circuit breaker is open and its next probe is due later, CIRCUIT_BREAKER_PROBE_INTERVAL), previous_attempt (an earlier attempt of the delivery may still be sending), database_unreachable (the database could not be reached before the request went out), database_locked (a lock not granted within DATABASE_LOCK_TIMEOUT before the request went out) or worker_stopping (its worker began to stop while it waited there for room, WORKER_MAX_SENDS_IN_FLIGHT; another worker takes it)",
      labelNames: ['reason'] as const,
      registers,
    }),
    retentionDeleted: new Counter({
      name: 'webhook_retention_deleted_total',
      help: 'Rows the retention sweep deleted past the retention period: kind = deliveries (with their attempts), events, previous_secrets (signing secrets whose rotation grace period ended)',
      labelNames: ['kind'] as const,
      registers,
    }),
    repairs: new Counter({
      name: 'webhook_repairs_total',
      help:
        'What the repair check (a Temporal Schedule) found and put right: undispatched_event (an event whose delivery workflows were not all started, its API process stopped in between), ' +
        'pending_without_workflow (a delivery queued for a retry whose workflow had closed or never started), pending_retry_lost (one queued for a retry whose workflow still waited for it), ' +
        'processing_without_workflow (an attempt left open by a workflow that has closed: the delivery is dead-lettered), ' +
        'processing_after_dead_letter (an attempt started after its round was dead-lettered and never recorded: dead-lettered again), ' +
        'forgotten_line (the head of a waiting line woken because a place of its scope was free and nobody else would wake it: its waker died), ' +
        'operation_never_started (a bulk retry whose workflow was never started: started), operation_workflow_closed (a bulk retry whose workflow closed without recording its end: ended failed)',
      labelNames: ['problem'] as const,
      registers,
    }),
    publishToDelivered: new Histogram({
      name: 'webhook_publish_to_delivered_seconds',
      help: 'Time from accepting an event to the 2xx of its delivery, retries included',
      buckets: DELIVERY_BUCKETS,
      registers,
    }),
    httpRequests: new Counter({
      name: 'http_requests_total',
      help: 'API requests by method, route pattern and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers,
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'API request latency by method, route pattern and status',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: SECONDS_BUCKETS,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The database the gauges read at each scrape, and the configured limits its send places are counted against. */
export interface DatabaseFigures {
  db: Database;
  limits: DefaultSendLimits;
}

/**
 * The Prometheus text of this process: its own registry, then the Temporal SDK's runtime
 * metrics scraped from the SDK's exporter when this process runs a worker.
 */
export async function renderMetrics(metrics: Metrics, sdkMetricsUrl?: string): Promise<string> {
  const own = await metrics.registry.metrics();
  if (!sdkMetricsUrl) return own;
  try {
    const response = await fetch(sdkMetricsUrl, { signal: AbortSignal.timeout(2_000) });
    return `${own}\n# Temporal SDK runtime metrics\n${await response.text()}`;
  } catch {
    return `${own}\n# Temporal SDK runtime metrics unavailable\n`;
  }
}

/**
 * Serves {@link renderMetrics} on `GET /metrics` at `host:port`, a server of its own so the
 * figures never share the API's port. Rejects, naming METRICS_PORT, when the port is taken.
 */
export async function serveMetrics(metrics: Metrics, sdkMetricsUrl: string | undefined, at: { host: string; port: number }): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') return void res.writeHead(404).end();
    void renderMetrics(metrics, sdkMetricsUrl).then((text) =>
      res.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(text),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot serve /metrics on ${at.host}:${at.port} (set METRICS_PORT): ${error.message}`)),
    );
    server.listen(at.port, at.host, resolve);
  });
  return server;
}
