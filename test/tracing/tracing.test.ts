/**
 * Tracing end to end on the dev-server topology: the service started as `npm start` starts it
 * (src/main.ts, role `all`, on the suite's Temporal server and database) with the standard
 * OTEL_* variables pointing at a real OpenTelemetry Collector, delivering to a real HTTPS
 * receiver; the spans are read back from the collector's file output. Once per OTLP protocol,
 * and once with tracing off.
 */
import { Client, Connection } from '@temporalio/client';
import { IllegalStateError } from '@temporalio/common';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { recordEvent } from '../../src/db/queries/events.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { tracingBundlePath, workflowBundleOptions } from '../../src/temporal/worker.ts';
import { startCollector, type Collector } from '../support/collector.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { embeddedEnv, freePorts, killStarted, lastLines, startGroup, waitForExit, waitForReady, type GroupProcess } from '../support/embedded-service.ts';
import { docauthData } from '../support/event-data.ts';
import { connectToTestTemporal } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.ts';
import { serviceNodeFlags } from '../support/service-command.ts';
import { attemptSpans, expectOneDeliveryTrace, named, only, spansOf } from '../support/traces.ts';
import { deadlineIn } from '../support/wait.ts';

const V2 = '/api-gateway/v2';
const PRELOAD = path.join(import.meta.dirname, 'loaded-modules.mjs');
/** Packages of the OpenTelemetry SDK and of the Temporal interceptors: none may load while tracing is off. */
const SDK_PACKAGES = [
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/context-async-hooks',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/exporter-trace-otlp-grpc',
  '@temporalio/interceptors-opentelemetry',
];

let collector: Collector;
let receiver: HttpsReceiver;
let database: SharedTestDatabase;
let workDir: string;
const encryptionKey = generateEncryptionKey();

beforeAll(async () => {
  // The replays' worker logs its states at INFO. The suite's files share their worker process
  // (isolate: false), so another file's worker may have made the runtime already: then it keeps its logger.
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch (error) {
    if (!(error instanceof IllegalStateError)) throw error;
  }
  workDir = mkdtempSync(path.join(os.tmpdir(), 'tracing-test-'));
  // The bundle with the tracing interceptors, beside a plain one the services with tracing on never read.
  const { code } = await bundleWorkflowCode({ ...workflowBundleOptions(true), logger: new DefaultLogger('WARN') });
  writeFileSync(tracingBundlePath(path.join(workDir, 'workflow-bundle.js')), code);
  [collector, receiver, database] = await Promise.all([startCollector(), startHttpsReceiver(), openSharedTestDatabase()]);
  receiver.behave((request) => {
    if (request.path.startsWith('/hooks/retried')) return { status: attemptsOf(request) <= 2 ? 500 : 200 };
    if (request.path.startsWith('/hooks/dead-lettered')) return { status: deadLetteredAnswer };
    return { status: 200 };
  });
  // Long enough for a first build of the collector (CI builds it before the suite).
}, 600_000);

afterAll(async () => {
  killStarted();
  await collector?.stop();
  await receiver?.close();
  await database?.close();
  rmSync(workDir, { recursive: true, force: true });
});

/**
 * Replays a delivery's workflow history, as a worker does after a restart or when the workflow
 * had left its cache: with the bundle with tracing or the plain one (throws on nondeterminism).
 * Resolves how many spans the workflow interceptors handed to the exporter sink meanwhile (a
 * worker drops those calls during a replay; counted here, they show the interceptors ran).
 */
async function replay(deliveryId: string, tracing: boolean): Promise<number> {
  const connection = await connectToTestTemporal((options) => Connection.connect(options));
  try {
    const history = await new Client({ connection }).workflow.getHandle(deliveryId).fetchHistory();
    let exports = 0;
    const codePath = tracing ? tracingBundlePath(path.join(workDir, 'workflow-bundle.js')) : inject('workflowBundlePath');
    await Worker.runReplayHistory(
      { workflowBundle: { codePath }, ...(tracing ? { sinks: { exporter: { export: { fn: (_info, spans: unknown[]) => void (exports += spans.length), callDuringReplay: true } } } } : {}) },
      history,
      deliveryId,
    );
    return exports;
  } finally {
    await connection.close();
  }
}

/**
 * Resolves once the workflows of `deliveryIds` have closed. A delivery's status is written by its
 * send activity, a moment before its workflow's last task ends the workflow's own span: a service
 * stopped in between would leave that span unended, so never exported.
 */
async function untilWorkflowsClosed(deliveryIds: readonly string[]): Promise<void> {
  const connection = await connectToTestTemporal((options) => Connection.connect(options));
  try {
    const client = new Client({ connection });
    await vi.waitFor(
      async () => {
        for (const id of deliveryIds) expect((await client.workflow.getHandle(id).describe()).status.name, id).not.toBe('RUNNING');
      },
      { timeout: 30_000, interval: 200 },
    );
  } finally {
    await connection.close();
  }
}

/** What the dead-lettered endpoint answers: failures until the test lets it recover. */
let deadLetteredAnswer = 500;
/** How many requests of the same delivery the receiver has had, this one included. */
function attemptsOf(request: ReceivedRequest): number {
  return receiver.requests.filter((other) => other.headers['x-service-delivery-id'] === request.headers['x-service-delivery-id']).length;
}

/** A service started like `npm start` with its own task queue, `otel` added to its environment. */
interface Service {
  readonly api: string;
  readonly process: GroupProcess;
  /** Its JSON log lines. */
  logs(): Record<string, unknown>[];
  /** SIGTERM; resolves once it has exited (its spans flushed). */
  stop(): Promise<void>;
}

async function startTracedService(otel: Record<string, string>, options: { loadedModulesFile?: string; bundleDir?: string } = {}): Promise<Service> {
  const ports = await freePorts();
  const env = embeddedEnv(path.join(workDir, `data-${randomUUID()}`), ports);
  for (const name of Object.keys(env)) if (name.startsWith('OTEL_')) delete env[name];
  Object.assign(env, {
    DATABASE_URL: database.url,
    SECRET_ENCRYPTION_KEY: encryptionKey,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_TASK_QUEUE: `tracing-${randomUUID()}`,
    WORKFLOW_BUNDLE_PATH: path.join(options.bundleDir ?? workDir, 'workflow-bundle.js'),
    DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
    DELIVERY_CA_FILE: receiver.certFile,
    // The repair check starts the event this test leaves undispatched: soon, not after 30 s.
    REPAIR_INTERVAL: '5s',
    ...(options.loadedModulesFile ? { LOADED_MODULES_FILE: options.loadedModulesFile } : {}),
    ...otel,
  });
  const preload = options.loadedModulesFile ? ['--import', PRELOAD] : [];
  const started = startGroup(process.execPath, [...serviceNodeFlags(), ...preload, 'src/main.ts', 'all'], env);
  await waitForReady(started, ports.api);
  return {
    api: `http://127.0.0.1:${ports.api}`,
    process: started,
    logs: () =>
      started
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    async stop() {
      started.child.kill('SIGTERM');
      const exit = await waitForExit(started);
      expect(exit, lastLines(started.output())).toEqual({ code: 0, signal: null });
    },
  };
}

async function call(url: string, init: { method?: string; token: string; body?: unknown; headers?: Record<string, string> }) {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { Authorization: `Bearer ${init.token}`, ...(init.body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...init.headers },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as { data: Record<string, any> } };
}

/** A project with an API key (webhooks) and a producer key (events). */
async function createProject() {
  const projectId = `prj_${randomUUID().slice(0, 8)}`;
  const apiKey = await createApiKey(database.db, { projectId, services: ['webhooks'] });
  const producerKey = await createApiKey(database.db, { projectId, services: ['events'] });
  return { projectId, apiKeyId: apiKey.key.id, token: apiKey.token, producerKey: producerKey.token };
}

type Project = Awaited<ReturnType<typeof createProject>>;

async function createWebhook(service: Service, project: Project, url: string, headers?: Record<string, string>) {
  const created = await call(`${service.api}${V2}/webhooks`, {
    method: 'POST',
    token: project.token,
    body: { api_key_id: project.apiKeyId, url, events: ['docauth.completed'], ...(headers ? { headers } : {}) },
  });
  expect(created.status).toBe(201);
  return { webhookId: created.body.data.id as string, secret: created.body.data.secret as string };
}

/** Publishes one event through the producers' door; returns its one delivery's id. */
async function publish(service: Service, project: Project, data = docauthData(), headers: Record<string, string> = {}): Promise<string> {
  const published = await call(`${service.api}/internal/v1/events`, {
    method: 'POST',
    token: project.producerKey,
    headers,
    body: { project_id: project.projectId, event: 'docauth.completed', data },
  });
  expect(published.status).toBe(202);
  return published.body.data.delivery_ids[0] as string;
}

async function waitForStatus(service: Service, project: Project, webhookId: string, deliveryId: string, status: string): Promise<void> {
  const deadline = deadlineIn(60_000);
  let last: unknown;
  while (!deadline.passed()) {
    const delivery = await call(`${service.api}${V2}/webhooks/${webhookId}/deliveries/${deliveryId}`, { token: project.token });
    last = delivery.body.data;
    if (delivery.body.data?.status === status) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`delivery ${deliveryId} did not become ${status}; last seen ${JSON.stringify(last)}`);
}

describe('tracing on the dev-server topology', () => {
  it('off (OTEL_SDK_DISABLED=true, an endpoint set): no OpenTelemetry SDK module loaded, nothing exported, no trace id in the logs; its workflow replays with tracing on', async () => {
    const quiet = await startCollector();
    const loadedModulesFile = path.join(workDir, 'off-modules.json');
    try {
      const service = await startTracedService(
        { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: quiet.httpEndpoint },
        // The plain bundle of the suite: a worker with tracing off reads that one.
        { loadedModulesFile, bundleDir: path.dirname(inject('workflowBundlePath')) },
      );
      const project = await createProject();
      const { webhookId } = await createWebhook(service, project, `${receiver.url}/off`);
      const deliveryId = await publish(service, project);
      await waitForStatus(service, project, webhookId, deliveryId, 'delivered');
      const logs = service.logs();
      await service.stop();
      // Its workflow, made without tracing, replays on a worker with tracing on (switching it on is a restart).
      expect(await replay(deliveryId, true)).toBeGreaterThan(0);
      expect(logs.some((line) => line.msg === 'event accepted')).toBe(true);
      expect(logs.filter((line) => 'trace_id' in line)).toEqual([]);
      const loaded = JSON.parse(readFileSync(loadedModulesFile, 'utf8')) as string[];
      expect(loaded.some((file) => file.includes('/node_modules/@temporalio/worker/'))).toBe(true);
      expect(SDK_PACKAGES.filter((name) => loaded.some((file) => file.includes(`/node_modules/${name}/`)))).toEqual([]);
    } finally {
      // Stopped, the collector has written out all it received.
      await quiet.stop();
    }
    expect(quiet.text()).toBe('');
  });

  it('http/protobuf: one trace from the producer through every attempt; the dead letter in its own; a manual retry linked to the API call; a start by the repair check in its publish\'s trace; replays with and without tracing; nothing secret in any span; trace ids in the logs', async () => {
    const service = await startTracedService({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.httpEndpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
    // Values that must never reach a span: a custom header, a token in the endpoint's query, event data, keys and secrets.
    const planted = {
      header: `Bearer planted-header-${randomUUID()}`,
      query: `planted-query-${randomUUID()}`,
      payload: `planted-payload-${randomUUID()}`,
    };
    const retried = await createProject();
    const deadLettered = await createProject();
    const hookA = await createWebhook(service, retried, `${receiver.url}/retried?token=${planted.query}`, { Authorization: planted.header });
    const hookB = await createWebhook(service, deadLettered, `${receiver.url}/dead-lettered`);
    // The producer calls within a trace of its own: the publish continues it.
    const producer = { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex') };
    const [a, b] = await Promise.all([
      publish(service, retried, docauthData({ session_id: planted.payload }), { traceparent: `00-${producer.traceId}-${producer.spanId}-01` }),
      publish(service, deadLettered),
    ]);
    // C: what an API process that stopped right after storing an event leaves (the event with the
    // traceparent of the request that accepted it, no workflow): the repair check starts it later.
    const outbox = await createProject();
    const hookC = await createWebhook(service, outbox, `${receiver.url}/outbox`);
    const accepted = { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex') };
    const stored = await recordEvent(database.db, new SecretBox(encryptionKey), {
      projectId: outbox.projectId,
      event: 'docauth.completed',
      occurredAt: new Date(),
      payload: docauthData(),
      traceparent: `00-${accepted.traceId}-${accepted.spanId}-01`,
    });
    const c = stored.deliveries[0]!.deliveryId;
    await Promise.all([
      waitForStatus(service, retried, hookA.webhookId, a, 'delivered'),
      waitForStatus(service, deadLettered, hookB.webhookId, b, 'dead_letter'),
      waitForStatus(service, outbox, hookC.webhookId, c, 'delivered'),
    ]);
    // A manual retry of B, to an endpoint that has recovered.
    deadLetteredAnswer = 200;
    const retry = await call(`${service.api}${V2}/webhooks/${hookB.webhookId}/deliveries/${b}/retry`, { method: 'POST', token: deadLettered.token });
    expect(retry.status).toBe(202);
    await waitForStatus(service, deadLettered, hookB.webhookId, b, 'delivered');
    // A caller with no valid producer credential decides no trace: its traceparent is not continued.
    const intruder = { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex') };
    const refused = await call(`${service.api}/internal/v1/events`, {
      method: 'POST',
      token: 'not-a-producer-key',
      headers: { traceparent: `00-${intruder.traceId}-${intruder.spanId}-01` },
      body: { project_id: retried.projectId, event: 'docauth.completed', data: docauthData() },
    });
    expect(refused.status).toBe(401);
    const logs = service.logs();
    await untilWorkflowsClosed([a, b, c]);
    // Stopped, the service has exported every span it made.
    await service.stop();
    // B's workflow (retries, a dead letter, a signal), made with tracing, replays with and without it.
    expect(await replay(b, true)).toBeGreaterThan(0);
    // Without tracing no span can be exported: what this shows is that the replay does not throw
    // (a nondeterminism error would).
    await replay(b, false);
    // The collector writes what it receives within moments: the checks are made again until all has come.
    await vi.waitFor(
      () => {
        const spans = collector.spans();
        // A: the producer's trace holds the publish, the start, the workflow and its three attempts.
        const traceA = expectOneDeliveryTrace(spans, a, 3);
        expect(traceA.traceId).toBe(producer.traceId);
        expect(traceA.server.parentSpanId).toBe(producer.spanId);
        expect(traceA.server.resource['service.name']).toBe('webhooks');
        expect(
          attemptSpans(spans, a).map((span) => [
            span.attributes['webhooks.attempt.number'],
            span.attributes['webhooks.attempt.outcome'],
            span.attributes['http.response.status_code'],
            span.attributes['webhooks.delivery.status'],
            typeof span.attributes['webhooks.attempt.duration_ms'],
            span.attributes['webhooks.webhook.id'],
          ]),
        ).toEqual([
          [1, 'http_error', 500, 'failed', 'number', hookA.webhookId],
          [2, 'http_error', 500, 'failed', 'number', hookA.webhookId],
          [3, 'succeeded', 200, 'delivered', 'number', hookA.webhookId],
        ]);

        // B: five failed attempts, then the dead letter, in B's trace; then the retried round's attempt.
        const traceB = expectOneDeliveryTrace(spans, b, 6).traceId;
        expect(attemptSpans(spans, b).map((span) => span.attributes['http.response.status_code'])).toEqual([500, 500, 500, 500, 500, 200]);
        const deadLetter = only(spansOf(spans, b), 'RunActivity:markDeadLetter');
        expect(deadLetter.attributes).toMatchObject({ 'webhooks.delivery.status': 'dead_letter' });
        expect(named(spansOf(spans, b), 'StartActivity:markDeadLetter').map((span) => span.spanId)).toEqual([deadLetter.parentSpanId]);

        // C: started by the repair check, yet in the trace of the request that accepted it.
        expect(only(spansOf(spans, c), 'StartWorkflow:deliveryWorkflow')).toMatchObject({ traceId: accepted.traceId, parentSpanId: accepted.spanId });
        // Every attempt in that trace, the last delivered. (On a loaded machine an attempt may fail
        // on the network first and be retried, as at-least-once allows: its outcome is shown.)
        const attemptsOfC = attemptSpans(spans, c).map((span) => [span.traceId, span.attributes['webhooks.attempt.outcome'], span.attributes['http.response.status_code']]);
        expect(attemptsOfC.at(-1)).toEqual([accepted.traceId, 'succeeded', 200]);
        expect(attemptsOfC.slice(0, -1).filter(([traceId, outcome]) => traceId !== accepted.traceId || !['timeout', 'network_error'].includes(String(outcome)))).toEqual([]);
        // The health probes are not traced.
        expect(spans.filter((span) => span.attributes['http.route'] === '/readyz')).toEqual([]);

        // The retry: the API call's trace holds its signal, linked to B's workflow, which records it.
        const retryCall = spans.find((span) => span.kind === 2 && span.attributes['http.route'] === `${V2}/webhooks/:id/deliveries/:delivery_id/retry`)!;
        expect(retryCall.name).toBe(`POST ${V2}/webhooks/:id/deliveries/:delivery_id/retry`);
        expect(retryCall.traceId).not.toBe(traceB);
        const signalled = only(spansOf(spans, b), 'SignalWithStartWorkflow:deliveryWorkflow');
        expect(signalled).toMatchObject({ traceId: retryCall.traceId, parentSpanId: retryCall.spanId });
        const handled = only(
          spans.filter((span) => span.parentSpanId === signalled.spanId),
          'HandleSignal:retry',
        );
        const runB = only(spansOf(spans, b), 'RunWorkflow:deliveryWorkflow');
        expect(handled.links).toEqual([{ traceId: traceB, spanId: runB.spanId }]);
        expect(runB.events).toContainEqual({ name: 'retry requested', attributes: { 'webhooks.retry.trace_id': retryCall.traceId } });

        // Log lines carry the trace and span ids of what they were written in, the activity's too.
        expect(logs.find((line) => line.msg === 'event accepted' && line.trace_id === traceA.traceId)).toMatchObject({ span_id: traceA.server.spanId });
        const attemptLogs = logs.filter((line) => line.msg === 'delivery attempt failed' && line.deliveryId === a);
        expect(attemptLogs).toHaveLength(2);
        const attemptSpanIds = attemptSpans(spans, a).map((span) => span.spanId);
        for (const line of attemptLogs) {
          expect(line.trace_id).toBe(traceA.traceId);
          expect(attemptSpanIds).toContain(line.span_id);
        }
        expect(logs.find((line) => line.msg === 'delivery queued for manual retry')).toMatchObject({ trace_id: retryCall.traceId });
        expect(spans.filter((span) => span.traceId === intruder.traceId)).toEqual([]);
        // The endpoint got no traceparent (DELIVERY_TRACEPARENT is off by default).
        expect(receiver.requests.filter((request) => request.path.startsWith('/hooks/retried')).map((request) => request.headers.traceparent)).toEqual([
          undefined,
          undefined,
          undefined,
        ]);
      },
      { timeout: 30_000, interval: 500 },
    );

    // Nothing secret anywhere in what was exported (the spans of this test's deliveries are in it).
    const exported = collector.text();
    expect(exported).toContain(a);
    const secrets = {
      ...planted,
      secretA: hookA.secret,
      secretB: hookB.secret,
      producerKey: retried.producerKey,
      apiToken: retried.token,
      apiTokenB: deadLettered.token,
      encryptionKey,
    };
    expect(Object.entries(secrets).filter(([, value]) => exported.includes(value))).toEqual([]);
  });

  it('http/json, with DELIVERY_TRACEPARENT=true: the delivery in one trace, and the endpoint gets the traceparent of its attempt', async () => {
    const service = await startTracedService({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.httpEndpoint}/v1/traces`,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      DELIVERY_TRACEPARENT: 'true',
    });
    const project = await createProject();
    const { webhookId } = await createWebhook(service, project, `${receiver.url}/traceparent`);
    const deliveryId = await publish(service, project);
    await waitForStatus(service, project, webhookId, deliveryId, 'delivered');
    await untilWorkflowsClosed([deliveryId]);
    await service.stop();
    await vi.waitFor(
      () => {
        const spans = collector.spans();
        const { traceId } = expectOneDeliveryTrace(spans, deliveryId, 1);
        const exchange = spans.find((span) => span.name === 'POST' && span.parentSpanId === attemptSpans(spans, deliveryId)[0]!.spanId)!;
        const request = receiver.requests.find((received) => received.headers['x-service-delivery-id'] === deliveryId)!;
        expect(request.headers.traceparent).toBe(`00-${traceId}-${exchange.spanId}-01`);
      },
      { timeout: 30_000, interval: 500 },
    );
  });

  it('grpc: the delivery in one trace, under OTEL_SERVICE_NAME with OTEL_RESOURCE_ATTRIBUTES; the SDK loaded', async () => {
    const loadedModulesFile = path.join(workDir, 'grpc-modules.json');
    const service = await startTracedService(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.grpcEndpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_SERVICE_NAME: 'webhooks-grpc-test',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,service.namespace=webhooks%20tests',
      },
      { loadedModulesFile },
    );
    const project = await createProject();
    const { webhookId } = await createWebhook(service, project, `${receiver.url}/grpc`);
    const deliveryId = await publish(service, project);
    await waitForStatus(service, project, webhookId, deliveryId, 'delivered');
    await untilWorkflowsClosed([deliveryId]);
    await service.stop();
    await vi.waitFor(
      () => {
        const { server } = expectOneDeliveryTrace(collector.spans(), deliveryId, 1);
        expect(server.resource).toMatchObject({ 'service.name': 'webhooks-grpc-test', 'deployment.environment.name': 'test', 'service.namespace': 'webhooks tests' });
      },
      { timeout: 30_000, interval: 500 },
    );
    // The same check that found none of them with tracing off finds them all here.
    const loaded = JSON.parse(readFileSync(loadedModulesFile, 'utf8')) as string[];
    expect(SDK_PACKAGES.filter((name) => !loaded.some((file) => file.includes(`/node_modules/${name}/`)))).toEqual([
      '@opentelemetry/exporter-trace-otlp-proto',
      '@opentelemetry/exporter-trace-otlp-http',
    ]);
  });
});
