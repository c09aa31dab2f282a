import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, inject } from 'vitest';
import { createApp } from '../../src/app.ts';
import { parseConfig } from '../../src/config.ts';
import type { Database, DatabaseHandle } from '../../src/db/client.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { generateEncryptionKey, randomToken, SecretBox } from '../../src/secrets/crypto.ts';
import { connectToTemporal, type TemporalConnectionOptions } from '../../src/temporal/connection.ts';
import { activityCompletion } from '../../src/temporal/activity-completion.ts';
import { DeliveryScheduler } from '../../src/temporal/scheduler.ts';
import { startDeliveryWorker, type DeliveryWorker } from '../../src/temporal/worker.ts';
import { openSharedTestDatabase, openTestDatabase, type TestDatabaseOptions } from './database.ts';
import { startHttpsReceiver, type HttpsReceiver } from './https-receiver.ts';

export interface HarnessOptions {
  /** The worker's RETENTION_PERIOD (30 days by default). */
  retentionMs?: number;
  /** Run a delivery worker on the harness's own task queue. */
  worker?: boolean;
  /** Endpoint health rule of that worker; the configuration's default otherwise. */
  autoDisable?: { afterMs: number; minDeadLetters: number };
  /** Deliveries per second of bulk retry operations (BULK_RETRY_RATE). */
  bulkRetryRate?: number;
  /** Delivery settings of that worker; private targets are allowed by default in tests. */
  delivery?: { timeoutMs?: number; allowPrivateTargets?: boolean; caFile?: string };
  /** Send capacity of that worker (the *_MAX_IN_FLIGHT settings, CIRCUIT_BREAKER_THRESHOLD); the configuration's defaults otherwise. */
  flow?: Partial<ReturnType<typeof parseConfig>['flow']>;
  /** What one project may put into the service (publish quota, webhooks, bulk retries); the configuration's defaults otherwise. */
  admission?: Partial<ReturnType<typeof parseConfig>['admission']>;
  /** Activity slots of that worker (the SDK's maxConcurrentActivityTaskExecutions); the SDK's default otherwise. */
  activitySlots?: number;
  /** A Temporal server of the test's own (a dev server with other settings); the run's otherwise. */
  temporalAddress?: string;
  /** How the database is opened (a statement counter, timeouts). */
  database?: TestDatabaseOptions;
  /**
   * The worker's own connection to the harness's database, opened from its URL (a test's, through
   * a proxy): the database is then served on a port on PGlite too, opened without `database`'s
   * options. The harness's own otherwise.
   */
  workerDatabase?: (url: string) => Promise<Database>;
}

/** A JSON response as the tests see it. */
export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/**
 * Connects with `connect` to the run's Temporal server (test/global-setup.ts) as the service does:
 * with the TEMPORAL_TLS* settings and TEMPORAL_API_KEY of TEMPORAL_ADDRESS when that is given.
 */
export function connectToTestTemporal<T>(connect: (options: TemporalConnectionOptions) => Promise<T>, address = inject('temporalAddress')): Promise<T> {
  return connectToTemporal(address, parseConfig(process.env).temporal, connect);
}

/**
 * The service assembled from real parts for one test file: a fresh database (Postgres or
 * PGlite), the shared Temporal dev server, a task queue of its own, the Hono app, and
 * optionally a worker. Log lines are kept in `logs` for scanning.
 */
export async function startHarness(options: HarnessOptions = {}) {
  const shared = options.workerDatabase ? await openSharedTestDatabase() : undefined;
  const database: DatabaseHandle = shared ?? (await openTestDatabase(options.database));
  const workerDb = shared && options.workerDatabase ? await options.workerDatabase(shared.url) : database.db;
  // As in the service: one native connection, shared by the client and the worker.
  const connection = await connectToTestTemporal((connectionOptions) => NativeConnection.connect(connectionOptions), options.temporalAddress);
  const client = new Client({ connection });
  const taskQueue = `test-${randomUUID()}`;
  const scheduler = new DeliveryScheduler(client, taskQueue, {
    bulkRetryRate: options.bulkRetryRate,
    eagerStart: options.worker ?? false,
  });
  const secretBox = new SecretBox(generateEncryptionKey());
  // The operator's EVENT_PRODUCER_TOKEN, configured here; `publish` uses producer keys.
  const producerToken = `ptk_${randomToken(32)}`;
  const producerKeys = new Map<string, Promise<string>>();
  const logs: string[] = [];
  const logger = createLogger(
    'debug',
    {},
    new Writable({
      write(chunk, _encoding, callback) {
        logs.push(String(chunk));
        callback();
      },
    }),
  );
  const metrics = createMetrics();
  // The tests publish one project's events faster than the default quota: unless a test is about
  // the quota (it sets its own), it is lifted.
  const admission = { ...parseConfig({}).admission, publish: { rate: 100_000, burst: 1_000_000 }, ...options.admission };
  const deps = { db: database.db, temporal: client, scheduler, secretBox, producerToken, admission, logger, metrics };
  const app = createApp(deps);

  /** A worker on the harness's task queue, as the service's worker role starts it. */
  const newWorker = () =>
    startDeliveryWorker({
      connection,
      namespace: 'default',
      taskQueue,
      db: workerDb,
      secretBox,
      scheduler,
      completion: activityCompletion(client),
      logger,
      metrics,
      delivery: {
        timeoutMs: options.delivery?.timeoutMs ?? 30_000,
        allowPrivateTargets: options.delivery?.allowPrivateTargets ?? true,
        ca: options.delivery?.caFile ? readFileSync(options.delivery.caFile) : undefined,
      },
      workflowBundlePath: inject('workflowBundlePath'),
      maxCachedWorkflows: parseConfig({}).temporal.maxCachedWorkflows,
      autoDisable: options.autoDisable ?? parseConfig({}).autoDisable,
      retentionMs: options.retentionMs ?? parseConfig({}).retention.periodMs,
      flow: { ...parseConfig({}).flow, ...options.flow },
      ...(options.activitySlots !== undefined && { activitySlots: options.activitySlots }),
    });
  let worker: DeliveryWorker | undefined = options.worker ? await newWorker() : undefined;

  /** A producer key of `projectId` (an API key with the events service), made once per project. */
  function producerKey(projectId: string): Promise<string> {
    let key = producerKeys.get(projectId);
    if (!key) {
      key = createApiKey(database.db, { projectId, services: ['events'] }).then((created) => created.token);
      producerKeys.set(projectId, key);
    }
    return key;
  }

  async function request(
    method: string,
    path: string,
    init: { token?: string | undefined; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
  ): Promise<TestResponse> {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers.Authorization = `Bearer ${init.token}`;
    let body: string | undefined = init.rawBody;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const response = await app.request(path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  }

  return {
    app,
    db: database.db,
    /** Where the database is (a test may open a connection of its own to it). */
    databaseTarget: database.target,
    client,
    scheduler,
    secretBox,
    producerToken,
    taskQueue,
    logs,
    logger,
    metrics,
    request,
    /** Creates an API key straight in the database and returns its id and token. */
    async createKey(projectId = `prj_${randomUUID().slice(0, 8)}`, services = ['webhooks']) {
      const { key, token } = await createApiKey(database.db, { projectId, services });
      return { id: key.id, projectId, token };
    },
    producerKey,
    /**
     * Publishes an event through the producers' door, with a producer key of the body's
     * `project_id` (the operator's token when the body has none).
     */
    async publish(body: unknown) {
      const projectId = (body as { project_id?: unknown } | undefined)?.project_id;
      const token = typeof projectId === 'string' ? await producerKey(projectId) : producerToken;
      return request('POST', '/internal/v1/events', { token, body });
    },
    /** Stops the worker (as on SIGTERM: it drains its sends); the API goes on. */
    async stopWorker() {
      await worker?.stop();
      worker = undefined;
    },
    /** Starts a worker on the task queue when none runs (another replica, or the one stopped started again). */
    async startWorker() {
      worker ??= await newWorker();
    },
    async stop() {
      await worker?.stop();
      await connection.close();
      await database.close();
    },
  };
}

export type Harness = Awaited<ReturnType<typeof startHarness>>;

export { docauthData } from './event-data.ts';

/**
 * A harness with a worker that sends to an HTTPS receiver on 127.0.0.1 it trusts, started before
 * the file's tests and stopped after them: `harness` and `receiver` are read inside the tests.
 */
export function harnessWithReceiver(options: Omit<HarnessOptions, 'worker'> = {}) {
  let harness: Harness | undefined;
  let receiver: HttpsReceiver | undefined;
  beforeAll(async () => {
    receiver = await startHttpsReceiver();
    harness = await startHarness({ ...options, worker: true, delivery: { ...options.delivery, caFile: receiver.certFile } });
  });
  afterAll(async () => {
    await harness?.stop();
    await receiver?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the harness is started before the tests (beforeAll)');
    return value;
  };
  return {
    get harness() {
      return started(harness);
    },
    get receiver() {
      return started(receiver);
    },
  };
}
