/**
 * Experiment: the Temporal part of one delivery, alone (no database, no HTTP). A dev server
 * with the service's flags, a worker with the service's worker options running the real
 * `deliveryWorkflow` (or a variant) and a stub `sendDelivery` that returns at once, and a client
 * starting workflows the way `DeliveryScheduler.start` does. Measures workflows per second and
 * CPU milliseconds per workflow of the worker/client process and of the Temporal server.
 *
 *   npx tsx bench/experiments/temporal-path.ts [--workflows 1000] [--concurrency 32]
 *     [--variants service,eager-start,local-activity,eager-local,no-start-attributes]
 *     [--temporal-arg=<dev server arg> ...]
 *
 * Variants: `service` = as the service does it today (grpc-js client, activity, search
 * attributes at start); `eager-start` = the client built on the worker's NativeConnection with
 * requestEagerStart; `local-activity` = sendDelivery as a local activity; `eager-local` = both;
 * `no-start-attributes` = `service` without the search attributes and summary at start.
 */
import { parseArgs } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { parseConfig } from '../../src/config.ts';
import { DeliveryScheduler } from '../../src/temporal/scheduler.ts';
import {
  DeliveryStatusAttribute,
  EventTypeAttribute,
  ProjectIdAttribute,
  WebhookIdAttribute,
} from '../../workflows/search-attributes.ts';
import { startOwnTemporal } from '../lib/backends.ts';
import { processTree, readStat } from '../lib/procstat.ts';
import { percentiles, round } from '../lib/stats.ts';
import { costPerDelivery, scrape, type MetricSnapshot } from '../lib/temporal-metrics.ts';

const { values } = parseArgs({
  options: {
    workflows: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '32' },
    variants: { type: 'string', default: 'service,eager-start,local-activity,eager-local,no-start-attributes' },
    'temporal-arg': { type: 'string', multiple: true, default: [] },
  },
});
const total = Number(values.workflows);
const concurrency = Number(values.concurrency);
const variants = values.variants!.split(',').map((v) => v.trim());

const workflowsPath = fileURLToPath(new URL('./workflows.ts', import.meta.url));
process.stderr.write('bundling the workflows once...\n');
const { code } = await bundleWorkflowCode({ workflowsPath, logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });

function treeCpuSeconds(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + (readStat(p)?.cpuSeconds ?? 0), 0);
}

/** Starts a workflow of `id` the way `variant` measures (timed from here, for start_to_send_ms). */
function workflowStarter(variant: string, client: Client, scheduler: DeliveryScheduler, taskQueue: string, startTimes: Map<string, number>) {
  const eager = variant === 'eager-start' || variant === 'eager-local';
  const workflowType = variant === 'local-activity' || variant === 'eager-local' ? 'localDeliveryWorkflow' : 'deliveryWorkflow';
  return async (id: string) => {
    startTimes.set(id, performance.now());
    if (variant === 'service') {
      await scheduler.start([{ deliveryId: id, webhookId: 'wh_x', projectId: 'p', event: 'docauth.completed', url: 'https://example.com/h' }]);
      return;
    }
    await client.workflow.start(workflowType, {
      workflowId: id,
      taskQueue,
      args: [{ deliveryId: id, statusWhileOpen: true }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      ...(variant === 'no-start-attributes'
        ? {}
        : {
            typedSearchAttributes: [
              { key: WebhookIdAttribute, value: 'wh_x' },
              { key: ProjectIdAttribute, value: 'p' },
              { key: EventTypeAttribute, value: 'docauth.completed' },
              { key: DeliveryStatusAttribute, value: 'pending' },
            ],
            staticSummary: 'docauth.completed → example.com',
          }),
      ...(eager ? { requestEagerStart: true } : {}),
    });
  };
}

/** Lets the variant's workflows finish (their last workflow task) before the CPU is read. */
async function untilClosed(client: Client, variant: string): Promise<void> {
  for (let tries = 0; tries < 600; tries += 1) {
    const open = await client.workflow
      .count(`ExecutionStatus = "Running" AND WorkflowId STARTS_WITH "wf-${variant}-"`)
      .catch(() => ({ count: -1 }));
    if (open.count === 0) break;
    if (open.count < 0) {
      await new Promise((resolve) => setTimeout(resolve, 3000)); // no count on this server: a grace period
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The variant's figures per workflow. */
function variantResult(
  variant: string,
  { t0, startsDone, sendsDone, t1 }: { t0: number; startsDone: number; sendsDone: number; t1: number },
  cpuSelf: NodeJS.CpuUsage,
  cpuServer: number,
  latencies: number[],
  before: MetricSnapshot | undefined,
  after: MetricSnapshot | undefined,
) {
  const seconds = (t1 - t0) / 1000;
  const selfMs = (cpuSelf.user + cpuSelf.system) / 1000;
  const cost = before && after ? costPerDelivery(before, after, total) : undefined;
  return {
    variant,
    workflows: total,
    concurrency,
    starts_per_s: round(total / ((startsDone - t0) / 1000), 1),
    sends_per_s: round(total / ((sendsDone - t0) / 1000), 1),
    completed_per_s: round(total / seconds, 1),
    start_to_send_ms: percentiles(latencies),
    cpu_ms_per_workflow: {
      worker_and_client_process: round(selfMs / total, 2),
      temporal_server: round((cpuServer * 1000) / total, 2),
    },
    cores: { worker_and_client_process: round(selfMs / 1000 / seconds, 2), temporal_server: round(cpuServer / seconds, 2) },
    server: cost
      ? {
          persistence_ops_per_workflow: cost.persistence_ops_per_delivery,
          persistence_ms_per_workflow: cost.persistence_ms_per_delivery,
          writes_per_workflow: round(
            cost.persistence
              .filter((row) => /^(Create|Update|Delete|Complete|Range|Append|Upsert|Put|Set)/.test(row.operation) || row.operation === 'AppendHistoryNodes')
              .reduce((sum, row) => sum + row.per_delivery, 0),
            2,
          ),
          frontend: cost.frontend.map((row) => `${row.operation} ×${row.per_delivery} (${row.mean_ms} ms)`),
          top_persistence: cost.persistence.slice(0, 8).map((row) => `${row.operation} ×${row.per_delivery} (${row.mean_ms} ms)`),
        }
      : undefined,
  };
}

async function runVariant(variant: string) {
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'temporal-path-'));
  const server = await startOwnTemporal(workDir, values['temporal-arg'] ?? []);
  try {
    const taskQueue = 'webhook-deliveries';
    const connection = await NativeConnection.connect({ address: server.url });
    const activityCalls: number[] = [];
    const startTimes = new Map<string, number>();
    const latencies: number[] = [];
    const worker = await Worker.create({
      connection,
      namespace: 'default',
      taskQueue,
      workflowBundle: { code },
      activities: {
        async sendDelivery(deliveryId: string) {
          const start = startTimes.get(deliveryId);
          if (start !== undefined) latencies.push(performance.now() - start);
          activityCalls.push(1);
          return 'delivered' as const;
        },
        async markDeadLetter() {},
      },
      maxCachedWorkflows: parseConfig({}).temporal.maxCachedWorkflows,
      shutdownGraceTime: '35s',
    });
    const running = worker.run();
    const eager = variant === 'eager-start' || variant === 'eager-local';
    const grpcConnection = eager ? undefined : await Connection.connect({ address: server.url });
    const client = new Client({ connection: eager ? connection : grpcConnection!, namespace: 'default' });
    const scheduler = new DeliveryScheduler(client, taskQueue);

    const start = workflowStarter(variant, client, scheduler, taskQueue, startTimes);

    // Warm-up: 30 workflows, not measured.
    for (let i = 0; i < 30; i += 1) await start(`warm-${variant}-${i}`);
    while (activityCalls.length < 30) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    activityCalls.length = 0;
    latencies.length = 0;

    const before = await scrape(server.metricsUrl!);
    const cpuSelf0 = process.cpuUsage();
    const cpuServer0 = treeCpuSeconds(server.pid);
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) await start(`wf-${variant}-${next++}`);
      }),
    );
    const startsDone = performance.now();
    while (activityCalls.length < total) await new Promise((resolve) => setTimeout(resolve, 20));
    const sendsDone = performance.now();
    await untilClosed(client, variant);
    const t1 = performance.now();
    const cpuSelf = process.cpuUsage(cpuSelf0);
    const cpuServer = treeCpuSeconds(server.pid) - cpuServer0;
    const after = await scrape(server.metricsUrl!);
    worker.shutdown();
    await running;
    await grpcConnection?.close();
    await connection.close();
    return variantResult(variant, { t0, startsDone, sendsDone, t1 }, cpuSelf, cpuServer, latencies, before, after);
  } finally {
    await server.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

const results = [];
for (const variant of variants) {
  process.stderr.write(`variant ${variant}...\n`);
  results.push(await runVariant(variant));
  process.stderr.write(`${JSON.stringify(results.at(-1))}\n`);
}
console.log(JSON.stringify({ date: new Date().toISOString(), temporal_args: values['temporal-arg'], load: os.loadavg(), results }, null, 2));
process.exit(0);
