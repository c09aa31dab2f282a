import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { AttemptOutcome } from './db/queries/deliveries.ts';

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

/**
 * The service's Prometheus metrics, in one registry per process. Labels are bounded
 * (status classes, route patterns): never a webhook, delivery or project id.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
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
      help: "Sends that waited for their endpoint instead of starting (no attempt used): endpoint_busy (its places, ENDPOINT_MAX_IN_FLIGHT, or one while its circuit is open, all in use) or rate_limit (the webhook's rate_limit)",
      labelNames: ['reason'] as const,
      registers,
    }),
    retentionDeleted: new Counter({
      name: 'webhook_retention_deleted_total',
      help: 'Rows the retention sweep deleted past the retention period: kind = deliveries (with their attempts), events',
      labelNames: ['kind'] as const,
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
