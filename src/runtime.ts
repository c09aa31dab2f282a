import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createApp } from './app.ts';
import { startHttpServer } from './http-server.ts';
import type { Config } from './config.ts';
import { openDatabase, type DatabaseHandle } from './db/client.ts';
import { createMetrics, serveMetrics, type Metrics } from './metrics.ts';
import type { SecretBox } from './secrets/crypto.ts';
import { loadSecretBox } from './secrets/installation.ts';
import { connectServiceClient } from './temporal/clients.ts';
import { activityCompletion } from './temporal/activity-completion.ts';
import { DeliveryScheduler } from './temporal/scheduler.ts';
import { installTemporalRuntime } from './temporal/runtime.ts';
import { ensureRepairSchedule, ensureRetentionSchedule } from './temporal/schedules.ts';
import { ensureSearchAttributes } from './temporal/search-attributes.ts';
import { UNDISPATCHED_AFTER_MS } from './repair/outbox.ts';
import { formatDuration } from './duration.ts';
import { startTracing, type Tracing } from './tracing/index.ts';
import { startDeliveryWorker } from './temporal/worker.ts';

/** Which parts this process runs. */
export type Role = 'all' | 'api' | 'worker' | 'migrate';

/** Things to close on shutdown, closed in reverse order of opening. */
class Closer {
  readonly #steps: { name: string; close: () => Promise<unknown> }[] = [];
  add(name: string, close: () => Promise<unknown>) {
    this.#steps.push({ name, close });
  }
  async closeAll(logger: Logger) {
    for (const step of this.#steps.reverse()) {
      try {
        await step.close();
      } catch (error) {
        logger.error({ err: error, step: step.name }, 'error during shutdown');
      }
    }
  }
}

/** A running service; `stop()` drains and closes everything it started. */
export interface RunningService {
  readonly apiUrl?: string;
  /** Where this process serves /metrics (absent in the `migrate` role). */
  readonly metricsUrl?: string;
  readonly temporalAddress: string;
  readonly temporalUiUrl?: string | undefined;
  /** Resolves when the worker stops on its own (a fatal worker error). */
  readonly workerDone?: Promise<void>;
  stop(): Promise<void>;
}

/** What every role's steps share once the database and Temporal are reached. */
interface Started {
  config: Config;
  role: Role;
  logger: Logger;
  closer: Closer;
}

/**
 * The database of this role: the configured PostgreSQL, or the embedded one (served by this
 * process in the `all` and `migrate` roles, by `npm start`'s otherwise), migrated.
 */
async function openServiceDatabase({ config, role, logger, closer }: Started): Promise<DatabaseHandle> {
  let databaseUrl: string;
  if (config.database.kind === 'postgres') {
    databaseUrl = config.database.url;
  } else if (role === 'all' || role === 'migrate') {
    // The local tools load only here: a service on PostgreSQL and Temporal never loads PGlite.
    const { spawnEmbeddedPostgres } = await import('./local/embedded-database.ts');
    const embedded = await spawnEmbeddedPostgres(config.database.dataDir, config.database.port);
    closer.add('embedded database', () => embedded.stop());
    databaseUrl = embedded.url;
    logger.info({ url: embedded.url, pid: embedded.pid }, 'embedded PGlite database served on loopback by its own process');
  } else {
    // Another process (`npm start`) owns the embedded database; connect to it.
    databaseUrl = `postgres://postgres@127.0.0.1:${config.database.port}/postgres`;
  }
  const database = await openDatabase({ kind: 'postgres', url: databaseUrl, poolMax: config.database.poolMax, timeouts: config.database.timeouts });
  closer.add('database pool', () => database.close());
  // Every role migrates at start; the advisory lock makes replicas that start together safe.
  await database.migrate();
  logger.info('database migrations applied');
  return database;
}

/** TEMPORAL_ADDRESS, or the dev server this process starts (`all`) or `npm start`'s. */
async function reachTemporal({ config, role, logger, closer }: Started): Promise<{ address: string; uiUrl?: string }> {
  if (config.temporal.address) return { address: config.temporal.address };
  if (role !== 'all') return { address: `127.0.0.1:${config.temporal.port}` };
  const { startDevServer } = await import('./local/dev-server.ts');
  const devServer = await startDevServer({
    cliPath: config.temporal.cliPath,
    stateDir: path.join(config.dataDir, 'temporal'),
    port: config.temporal.port,
    uiPort: config.temporal.uiPort,
    namespace: config.temporal.namespace,
  });
  closer.add('Temporal dev server', () => devServer.stop());
  logger.info({ address: devServer.address, ui: devServer.uiUrl }, 'Temporal dev server started');
  return { address: devServer.address, ...(devServer.uiUrl ? { uiUrl: devServer.uiUrl } : {}) };
}

/** The parts of a running service its roles are assembled from. */
interface Parts extends Started {
  database: DatabaseHandle;
  connection: NativeConnection;
  client: Client;
  scheduler: DeliveryScheduler;
  secretBox: SecretBox;
  metrics: Metrics;
  tracing: Tracing | undefined;
}

/** The worker role: search attributes, the delivery worker, and the schedules of the periodic work. `done`: the worker's end. */
async function startWorkerRole({ config, logger, closer, database, connection, client, scheduler, secretBox, metrics, tracing }: Parts): Promise<{ done: Promise<void> }> {
  const added = await ensureSearchAttributes(connection, config.temporal.namespace);
  if (added.length > 0) logger.info({ added }, 'registered search attributes');
  const worker = await startDeliveryWorker({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    db: database.db,
    secretBox,
    scheduler,
    completion: activityCompletion(client),
    logger,
    metrics,
    delivery: config.delivery,
    autoDisable: config.autoDisable,
    retentionMs: config.retention.periodMs,
    flow: config.flow,
    workflowBundlePath: config.temporal.workflowBundlePath,
    maxCachedWorkflows: config.temporal.maxCachedWorkflows,
    tracing,
    sendTraceparent: config.delivery.traceparent,
  });
  closer.add('worker', () => worker.stop());
  await ensureRetentionSchedule(client, {
    taskQueue: config.temporal.taskQueue,
    retentionMs: config.retention.periodMs,
    intervalMs: config.retention.sweepIntervalMs,
  });
  logger.info({ period: formatDuration(config.retention.periodMs), every: formatDuration(config.retention.sweepIntervalMs) }, 'retention sweep scheduled');
  await ensureRepairSchedule(client, {
    taskQueue: config.temporal.taskQueue,
    intervalMs: config.repair.intervalMs,
    undispatchedAfterMs: UNDISPATCHED_AFTER_MS,
    staleAfterMs: config.repair.staleAfterMs,
  });
  logger.info({ every: formatDuration(config.repair.intervalMs), after: formatDuration(config.repair.staleAfterMs) }, 'repair check scheduled');
  return { done: worker.done };
}

/** The API role: the Hono app served over HTTP. Resolves with its URL. */
async function startApiRole({ config, logger, closer, database, client, scheduler, secretBox, metrics, tracing }: Parts): Promise<string> {
  const app = createApp({
    db: database.db,
    temporal: client,
    scheduler,
    secretBox,
    producerToken: config.eventProducerToken,
    admission: config.admission,
    logger,
    metrics,
    publicUrl: config.http.publicUrl,
    tracing: tracing !== undefined,
  });
  const server = await startHttpServer(app.fetch, { port: config.http.port, host: config.http.host });
  closer.add('HTTP server', () => new Promise((resolve) => server.close(() => resolve(undefined))));
  const apiUrl = `http://${config.http.host}:${config.http.port}`;
  logger.info({ url: apiUrl }, 'API listening');
  return apiUrl;
}

/**
 * Starts the given role. `all` is the embedded one-command mode: it serves PGlite and
 * spawns the Temporal dev server unless DATABASE_URL / TEMPORAL_ADDRESS say otherwise.
 */
export async function startService(config: Config, role: Role, logger: Logger): Promise<RunningService> {
  const started: Started = { config, role, logger, closer: new Closer() };
  const { closer } = started;
  try {
    const database = await openServiceDatabase(started);
    if (role === 'migrate') {
      await closer.closeAll(logger);
      return { temporalAddress: '', stop: async () => {} };
    }
    const temporal = await reachTemporal(started);
    const secretBox = await loadSecretBox(config);

    // Closed after everything that makes spans, so that the last of them are exported.
    const tracing = await startTracing(config.tracing, role, logger);
    if (tracing) closer.add('tracing', () => tracing.shutdown());

    const runsWorker = role === 'all' || role === 'worker';
    const sdkMetricsAddress = runsWorker ? `127.0.0.1:${config.metrics.sdkPort}` : undefined;
    try {
      installTemporalRuntime(logger, sdkMetricsAddress);
    } catch (error) {
      throw new Error(`cannot serve the Temporal SDK metrics on ${sdkMetricsAddress} (set TEMPORAL_SDK_METRICS_PORT): ${(error as Error).message}`);
    }
    const { connection, client } = await connectServiceClient(
      { address: temporal.address, settings: config.temporal, namespace: config.temporal.namespace },
      tracing?.clientInterceptors,
    );
    closer.add('Temporal connection', () => connection.close());
    const scheduler = new DeliveryScheduler(client, config.temporal.taskQueue, { bulkRetryRate: config.bulkRetryRate, eagerStart: role === 'all' });
    const metrics = createMetrics({ database: { db: database.db, limits: config.flow } });
    const parts: Parts = { ...started, database, connection, client, scheduler, secretBox, metrics, tracing };

    const workerDone = runsWorker ? (await startWorkerRole(parts)).done : undefined;
    // Every role serves /metrics apart from the API, on METRICS_HOST (loopback by default):
    // delivery failure figures are for the operator's scraper, not for the API's clients.
    const metricsServer = await serveMetrics(metrics, sdkMetricsAddress && `http://${sdkMetricsAddress}/metrics`, config.metrics);
    closer.add('metrics server', () => new Promise((resolve) => metricsServer.close(resolve)));
    logger.info({ host: config.metrics.host, port: config.metrics.port }, 'metrics served on /metrics');
    const apiUrl = role === 'all' || role === 'api' ? await startApiRole(parts) : undefined;

    return {
      ...(apiUrl ? { apiUrl } : {}),
      metricsUrl: `http://${config.metrics.host}:${config.metrics.port}/metrics`,
      temporalAddress: temporal.address,
      temporalUiUrl: temporal.uiUrl,
      ...(workerDone ? { workerDone } : {}),
      stop: () => closer.closeAll(logger),
    };
  } catch (error) {
    await closer.closeAll(logger);
    throw error;
  }
}
