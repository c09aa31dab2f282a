import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Worker, type NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createDeliveryActivities } from '../../activities/delivery.ts';
import { createOperationActivities } from '../../activities/operations.ts';
import { createRepairActivities } from '../../activities/repair.ts';
import { createRetentionActivities } from '../../activities/retention.ts';
import type { Database } from '../db/client.ts';
import type { AutoDisableRule } from '../endpoint-health/auto-disable.ts';
import { createSender, type Sender } from '../delivery/sender.ts';
import { SendsInFlight } from '../delivery/sends-in-flight.ts';
import type { Metrics } from '../metrics.ts';
import type { FlowLimits } from '../flow-control/places.ts';
import type { SecretBox } from '../secrets/crypto.ts';
import { nodeArgsForChild } from '../node-child.ts';
import type { ActivityCompletion } from './activity-completion.ts';
import { BackgroundWork } from './background-work.ts';
import type { DeliveryScheduler } from './scheduler.ts';
import type { Tracing } from '../tracing/index.ts';
import { workerDrainMs } from '../../workflows/send-limits.ts';

const runFile = promisify(execFile);

/** The workflow code that bundles are built from (by `npm run build:workflows`, or at start). */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

/** The workflow interceptors (OpenTelemetry's) of the bundle a worker with tracing on runs. */
const TRACING_INTERCEPTORS_PATH = fileURLToPath(new URL('../../workflows/tracing-interceptors.ts', import.meta.url));

/** What `bundleWorkflowCode` builds the bundle from: with tracing, the interceptors are in it. */
export function workflowBundleOptions(tracing: boolean): { workflowsPath: string; workflowInterceptorModules: string[] } {
  return { workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: tracing ? [TRACING_INTERCEPTORS_PATH] : [] };
}

/**
 * Where the bundle with tracing is kept beside the one without (WORKFLOW_BUNDLE_PATH):
 * `dist/workflow-bundle.js` → `dist/workflow-bundle.tracing.js`.
 */
export function tracingBundlePath(bundlePath: string): string {
  return `${bundlePath.replace(/\.js$/, '')}.tracing.js`;
}

export interface DeliveryWorkerOptions {
  /** The process's connection to Temporal; the caller closes it after the worker stops. */
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Database;
  secretBox: SecretBox;
  scheduler: DeliveryScheduler;
  /** Reports the end of send activities whose HTTP exchange ran in the background. */
  completion: ActivityCompletion;
  logger: Logger;
  metrics: Metrics;
  delivery: { timeoutMs: number; allowPrivateTargets: boolean; ca?: Buffer | undefined };
  /** Workflows kept in memory between their tasks (the SDK's default grows with the heap limit). */
  maxCachedWorkflows: number;
  /** A bundle made by `npm run build:workflows`; used when the file exists. */
  workflowBundlePath?: string | undefined;
  /** Endpoint health: WEBHOOK_AUTO_DISABLE_AFTER and WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS. */
  autoDisable: AutoDisableRule;
  /** RETENTION_PERIOD: the scheduled sweep never deletes what this keeps. */
  retentionMs: number;
  /** Send capacity: the *_MAX_IN_FLIGHT settings, WORKER_MAX_SENDS_IN_FLIGHT, the CIRCUIT_BREAKER_* settings and PROJECT_RECOVERY_RATE. */
  flow: {
    webhookMaxInFlight: number;
    projectMaxInFlight: number;
    destinationMaxInFlight: number;
    workerMaxInFlight: number;
    breakerThreshold: number;
    probeIntervalMs: number;
    recoveryRate: number | null;
  };
  /** Activity slots (the SDK's maxConcurrentActivityTaskExecutions, 100 by default): the sends hold one only while they prepare. */
  activitySlots?: number;
  /**
   * Tracing on: the worker runs the bundle with the workflow interceptors and adds the activity
   * interceptors and the workflows' span sink.
   */
  tracing?: Pick<Tracing, 'workerOptions'> | undefined;
  /** Send a `traceparent` header to customer endpoints (DELIVERY_TRACEPARENT). */
  sendTraceparent?: boolean;
}

/** A running worker: the workflows, and the delivery, retention, bulk retry and repair activities. */
export interface DeliveryWorker {
  /** Resolves when the worker has stopped. */
  readonly done: Promise<void>;
  /** Stops polling and lets running activities, and the sends they handed to the background, finish. */
  stop(): Promise<void>;
}


/**
 * How long a delivery woken for its turn is expected back (its workflow asks again within
 * moments; past this the next in line may go first), and how long a start time a rate limit gave
 * it is kept for it.
 */
const TURN_RESERVATION_MS = 60_000;

/** Time a send's place is held beyond the HTTP exchange's limit, for its database statements. */
const HOLD_MARGIN_MS = 30_000;

/**
 * How long a stopping worker waits for the reports of the bulk retry steps in its background: a
 * step stops before its next signal when the stop begins, so only a signal under way and the
 * report are left. Past it (Temporal unreachable), a step is retried after its heartbeat timeout.
 */
const STEP_REPORTS_DRAIN_MS = 2_000;

const BUNDLE_SCRIPT = fileURLToPath(new URL('./bundle-workflows.ts', import.meta.url));

/**
 * Bundles the workflow code (webpack) in a short-lived child process: in this one, webpack
 * and its loaders would stay in memory for the life of the worker, about 90 MB.
 */
async function bundleInChildProcess(tracing: boolean): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'workflow-bundle-'));
  const file = path.join(dir, 'workflow-bundle.js');
  try {
    const args = [...nodeArgsForChild(), BUNDLE_SCRIPT, file, ...(tracing ? ['--tracing'] : [])];
    await runFile(process.execPath, args, { maxBuffer: 16 * 1024 * 1024 }).catch(
      (error: { stderr?: string; message: string }) => {
        throw new Error(`bundling the workflow code failed: ${error.stderr?.trim() || error.message}`);
      },
    );
    return await readFile(file, 'utf8');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Node before 24 keeps AsyncLocalStorage on async hooks, and aborts the whole process ("async hook
 * stack has become corrupted") when the SDK's execution timeout cuts a workflow activation, as it
 * does in a replica paused past 5 s in the middle of one (docs/deployment.md, "Node").
 */
const CUT_ACTIVATION_ABORTS_PROCESS = Number(process.versions.node.split('.')[0]) < 24;

/** Creates and runs the delivery worker. */
export async function startDeliveryWorker(options: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const sender: Sender = createSender({
    timeoutMs: options.delivery.timeoutMs,
    allowPrivateTargets: options.delivery.allowPrivateTargets,
    ca: options.delivery.ca,
  });
  const tracing = options.tracing !== undefined;
  const bundlePath = options.workflowBundlePath && (tracing ? tracingBundlePath(options.workflowBundlePath) : options.workflowBundlePath);
  const prebuilt = bundlePath && existsSync(bundlePath) ? bundlePath : undefined;
  const workflowBundle = prebuilt ? { codePath: prebuilt } : { code: await bundleInChildProcess(tracing) };
  const sends = new SendsInFlight(options.flow.workerMaxInFlight);
  const drainMs = workerDrainMs(options.delivery.timeoutMs);
  const flowLimits: FlowLimits = {
    webhookMaxInFlight: options.flow.webhookMaxInFlight,
    projectMaxInFlight: options.flow.projectMaxInFlight,
    destinationMaxInFlight: options.flow.destinationMaxInFlight,
    holdMs: options.delivery.timeoutMs + HOLD_MARGIN_MS,
    reserveMs: TURN_RESERVATION_MS,
    probeIntervalMs: options.flow.probeIntervalMs,
    recoveryRate: options.flow.recoveryRate,
  };
  const stopping = new AbortController();
  const shutdownStarted = new AbortController();
  const operationSteps = new BackgroundWork();
  options.metrics.trackSendsInFlight(sends);
  const worker = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowBundle,
    activities: {
      ...createDeliveryActivities({
        db: options.db,
        secretBox: options.secretBox,
        sender,
        logger: options.logger.child({ component: 'activity' }),
        metrics: options.metrics,
        sendTraceparent: options.sendTraceparent ?? false,
        autoDisable: options.autoDisable,
        flow: {
          limits: flowLimits,
          breakerThreshold: options.flow.breakerThreshold,
          wake: (deliveryIds) => options.scheduler.wakeForTurn(deliveryIds),
        },
        sends,
        completion: options.completion,
        stopping: stopping.signal,
        shutdownStarted: shutdownStarted.signal,
      }),
      ...createRetentionActivities({
        db: options.db,
        logger: options.logger.child({ component: 'retention' }),
        metrics: options.metrics,
        retentionMs: options.retentionMs,
      }),
      ...createOperationActivities({
        db: options.db,
        scheduler: options.scheduler,
        logger: options.logger.child({ component: 'operation' }),
        completion: options.completion,
        background: operationSteps,
        shutdownStarted: shutdownStarted.signal,
        stopping: stopping.signal,
      }),
      ...createRepairActivities({
        db: options.db,
        scheduler: options.scheduler,
        logger: options.logger.child({ component: 'repair' }),
        metrics: options.metrics,
        limits: flowLimits,
      }),
    },
    maxCachedWorkflows: options.maxCachedWorkflows,
    ...(options.activitySlots !== undefined && { maxConcurrentActivityTaskExecutions: options.activitySlots }),
    // Activities still preparing a send get as long as the sends in the background.
    shutdownGraceTime: drainMs,
    ...options.tracing?.workerOptions,
  });
  options.logger.info({ taskQueue: options.taskQueue, bundle: prebuilt ?? 'compiled at start', tracing }, 'worker started');
  if (CUT_ACTIVATION_ABORTS_PROCESS) {
    options.logger.warn(
      { node: process.version },
      'this Node aborts the worker process when a workflow activation outlives its 5 s execution timeout (a replica paused mid-activation): run workers on Node 24 or later',
    );
  }

  const done = worker.run().finally(async () => {
    // The bulk retry steps spreading their signals stopped when the stop began: their reports go out first.
    await operationSteps.drain(STEP_REPORTS_DRAIN_MS);
    // What is being tried again (a wake signal, a report) is not tried once more, so a stop waits
    // for exchanges and a report's call under way, never for a Temporal it cannot reach: the
    // deliveries ask again by themselves, and an unreported attempt is retried once its heartbeat lapses.
    stopping.abort();
    const left = await sends.drain(drainMs);
    if (left > 0) options.logger.warn({ left }, 'stopped with sends still in flight: their attempts are retried once their heartbeats lapse');
    sender.close();
  });
  return {
    done,
    async stop() {
      shutdownStarted.abort();
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
