/**
 * `npm run cluster`: the production topology (PostgreSQL, the Temporal server on it, the Web UI,
 * two API and two worker replicas, each its own process) brought up, used end to end through
 * both API replicas (the API, and the customer portal in Chromium), taken down and brought up
 * again on its data. With CLUSTER_TLS=true (as CI runs it), its Temporal frontend requires mutual
 * TLS: every part of the topology goes through it with the client certificate, and clients
 * without it, or with a wrong one, are refused.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { boundPorts, type ClusterLayout } from '../../src/local/cluster/layout.ts';
import { portIsFree, processStartTime } from '../../src/local/cluster/processes.ts';
import type { ClusterStatus } from '../../src/local/cluster/topology.ts';
import { ConfigError, parseConfig } from '../../src/config.ts';
import { verifyWebhook } from '../../src/receiver/index.ts';
import { randomToken } from '../../src/secrets/crypto.ts';
import { connectToTemporal } from '../../src/temporal/connection.ts';
import { launchChromium, openPortalLink } from '../support/browser.ts';
import { startClusterTopology, type ClusterHandle } from '../support/cluster.ts';
import { startCollector, type Collector } from '../support/collector.ts';
import { docauthData } from '../support/event-data.ts';
import { call as httpCall, type HttpAnswer } from '../support/http.ts';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.ts';
import { freePort } from '../support/ports.ts';
import { serviceNodeFlags } from '../support/service-command.ts';
import { attemptSpans, expectOneDeliveryTrace, only, spansOf } from '../support/traces.ts';
import { deadlineIn } from '../support/wait.ts';

const run = promisify(execFile);
const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const PRODUCER_TOKEN = `ptk_${randomToken(32)}`;
/** CLUSTER_TLS of the run: the topology's frontend requires mutual TLS. */
const TLS = parseConfig(process.env).cluster.tls;

let cluster: ClusterHandle;
let receiver: HttpsReceiver;
let collector: Collector;

/** The shared client's answer; a call that gets none fails the test. */
async function call(url: string, init: Parameters<typeof httpCall>[1] = {}): Promise<HttpAnswer> {
  const answer = await httpCall(url, init);
  if (typeof answer === 'string') throw new Error(`${url}: no answer (${answer})`);
  return answer;
}

async function poll<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = deadlineIn(timeoutMs);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (deadline.passed()) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The variables a process was started with (/proc/<pid>/environ). */
function environmentOf(pid: number): Record<string, string> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
}

/** A client of the topology's Temporal, connected with the variables `status` prints for clients. */
function connectClient(status: ClusterStatus): Promise<Connection> {
  return connectToTemporal(status.temporal, parseConfig(status.temporalEnv).temporal, (options) => Connection.connect(options));
}

const requestsFor = (deliveryId: string): ReceivedRequest[] =>
  receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);

beforeAll(async () => {
  receiver = await startHttpsReceiver();
  // Every replica exports its spans to one real OpenTelemetry Collector (OTLP over HTTP).
  collector = await startCollector();
  cluster = await startClusterTopology({
    name: 'e2e',
    env: {
      DELIVERY_CA_FILE: receiver.certFile,
      DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
      EVENT_PRODUCER_TOKEN: PRODUCER_TOKEN,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.httpEndpoint,
    },
  });
});

afterAll(async () => {
  await cluster?.destroy();
  await receiver?.close();
  await collector?.stop();
});

describe('npm run cluster', () => {
  let apiToken: string;
  let apiKeyId: string;
  let projectId: string;
  let webhookId: string;
  let secret: string;
  const deliveryOf: Record<'plain' | 'retried' | 'deadLettered', string> = { plain: '', retried: '', deadLettered: '' };
  /** The portal's test event, sent after the Temporal search checks. */
  let portalDelivery = '';

  it('reports every process of the topology with the addresses it serves', async () => {
    const status = await cluster.refresh();
    expect(status.api).toHaveLength(2);
    expect(new URL(status.api[1]!).port).toBe(String(Number(new URL(status.api[0]!).port) + 1));
    expect(status.temporal).toMatch(/^127\.0\.0\.1:\d+$/);
    const tlsDir = path.join(cluster.dataDir, 'cluster', 'tls');
    expect(status.temporalEnv).toEqual({
      TEMPORAL_ADDRESS: status.temporal,
      ...(TLS && {
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(tlsDir, 'ca.pem'),
        TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(tlsDir, 'client.pem'),
        TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(tlsDir, 'client.key'),
        TEMPORAL_TLS_SERVER_NAME: 'localhost',
      }),
    });
    expect(status.ui).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(status.postgres).toMatch(/^postgres:\/\/webhooks:[^@]+@127\.0\.0\.1:\d+\/webhooks$/);
    expect(status.stopped).toEqual([]);
    expect(status.processes.map(({ role, index }) => `${role}-${index}`).sort()).toEqual(
      ['api-0', 'api-1', 'postgres-0', 'temporal-0', 'ui-0', 'worker-0', 'worker-1'],
    );
    const pids = status.processes.map((p) => p.pid);
    expect(new Set(pids).size).toBe(pids.length);
    for (const pid of pids) expect(processStartTime(pid), `pid ${pid}`).toBeDefined();
    // The replicas are the service's own node processes, started by `npm run api|worker`.
    for (const { role, pid } of status.processes.filter((p) => p.role === 'api' || p.role === 'worker')) {
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toEqual(expect.arrayContaining(['src/main.ts', role]));
    }
    for (const url of status.api) expect((await call(`${url}/readyz`)).status).toBe(200);
    expect((await fetch(status.ui)).status).toBe(200);
    // /metrics is never on an API port: each replica serves its own on loopback, API replica i on
    // METRICS_PORT+2(workers+i) after the two workers' METRICS_PORT and METRICS_PORT+2.
    const metricsPort = Number(cluster.env.METRICS_PORT);
    for (const [i, url] of status.api.entries()) {
      expect((await fetch(`${url}/metrics`)).status).toBe(404);
      expect(await (await fetch(`http://127.0.0.1:${metricsPort + 2 * (2 + i)}/metrics`)).text()).toContain('http_requests_total');
    }
    for (const i of [0, 1]) expect((await fetch(`http://127.0.0.1:${metricsPort + 2 * i}/metrics`)).status).toBe(200);
  });

  it('gives every replica the variables set at up and the secrets generated once in DATA_DIR', async () => {
    const { status } = cluster;
    const generatedKey = readFileSync(path.join(cluster.dataDir, 'secret-encryption.key'), 'utf8').trim();
    // EVENT_PRODUCER_TOKEN reaches every replica as set; the service never generates one.
    expect(existsSync(path.join(cluster.dataDir, 'producer-token'))).toBe(false);
    for (const { role, index, pid } of status.processes.filter((p) => p.role === 'api' || p.role === 'worker')) {
      const env = environmentOf(pid);
      expect(env, `${role} ${index}`).toMatchObject({
        DELIVERY_CA_FILE: receiver.certFile,
        EVENT_PRODUCER_TOKEN: PRODUCER_TOKEN,
        SECRET_ENCRYPTION_KEY: generatedKey,
        DATABASE_URL: status.postgres,
        ...status.temporalEnv,
        DATA_DIR: cluster.dataDir,
      });
    }
  });

  it('lets the admin CLI reach its database with the postgres URL that status prints', async () => {
    const env = { ...cluster.env, DATABASE_URL: cluster.status.postgres };
    const { stdout } = await run('npm', ['run', '--silent', 'cli', '--', 'keys', 'create', '--project', 'acme-cluster', '--services', 'webhooks', '--json'], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env,
    });
    const key = JSON.parse(stdout) as { id: string; token: string; project_id: string };
    expect(key.project_id).toBe('acme-cluster');
    apiToken = key.token;
    apiKeyId = key.id;
    projectId = key.project_id;
  });

  it('delivers a signed notification: webhook created on one API replica, event published on the other', async () => {
    const [api0, api1] = cluster.status.api as [string, string];
    const created = await call(`${api0}/api-gateway/v2/webhooks`, {
      token: apiToken,
      body: { api_key_id: apiKeyId, url: receiver.url, events: ['docauth.completed'] },
    });
    expect(created.status).toBe(201);
    webhookId = created.body.data.id;
    secret = created.body.data.secret;

    const published = await call(`${api1}/internal/v1/events`, {
      token: PRODUCER_TOKEN,
      body: { id: 'cluster-plain', project_id: projectId, event: 'docauth.completed', data: docauthData() },
    });
    expect(published.status).toBe(202);
    deliveryOf.plain = published.body.data.delivery_ids[0];
    await poll('the delivery', async () => requestsFor(deliveryOf.plain).at(0));
    const [request] = requestsFor(deliveryOf.plain);
    // Sealed by an API replica, opened by a worker replica: they share the generated key.
    expect(verifyWebhook({ rawBody: request!.rawBody, headers: request!.headers, secret }).id).toBe(deliveryOf.plain);
    const delivered = await poll('status delivered', async () => {
      const answer = await call(`${api0}/api-gateway/v2/webhooks/${webhookId}/deliveries/${deliveryOf.plain}`, { token: apiToken });
      return answer.body?.data?.status === 'delivered' ? answer.body.data : undefined;
    });
    expect(delivered.attempt_count).toBe(1);
  });

  it('retries a failing endpoint with backoff, and dead-letters one that never answers 2xx', async () => {
    const [api0] = cluster.status.api as [string];
    const failuresOf = new Map<string, number>();
    receiver.behave((request) => {
      const id = String(request.headers['x-service-delivery-id']);
      const failures = (failuresOf.get(id) ?? 0) + 1;
      failuresOf.set(id, failures);
      const body = JSON.parse(request.rawBody.toString('utf8')) as { data: { request_id: string } };
      if (body.data.request_id === 'always-fails') return { status: 500 };
      return failures <= 2 ? { status: 503 } : { status: 200 };
    });
    const publish = async (id: string, requestId: string) => {
      const answer = await call(`${api0}/internal/v1/events`, {
        token: PRODUCER_TOKEN,
        body: { id, project_id: projectId, event: 'docauth.completed', data: docauthData({ request_id: requestId }) },
      });
      expect(answer.status).toBe(202);
      return answer.body.data.delivery_ids[0] as string;
    };
    deliveryOf.retried = await publish('cluster-retried', 'fails-twice');
    deliveryOf.deadLettered = await publish('cluster-dead-letter', 'always-fails');

    const deliveryUrl = (id: string) => `${api0}/api-gateway/v2/webhooks/${webhookId}/deliveries/${id}`;
    const retried = await poll('the retried delivery', async () => {
      const answer = await call(deliveryUrl(deliveryOf.retried), { token: apiToken });
      return answer.body?.data?.status === 'delivered' ? answer.body.data : undefined;
    });
    expect(retried.attempt_count).toBe(3);
    const attempts = await call(`${deliveryUrl(deliveryOf.retried)}/attempts`, { token: apiToken });
    expect(attempts.body.data.map((a: { status_code?: number }) => a.status_code)).toEqual([503, 503, 200]);
    const gaps = requestsFor(deliveryOf.retried).map((r, i, all) => (i === 0 ? 0 : r.receivedAt - all[i - 1]!.receivedAt));
    expect(gaps[1]).toBeGreaterThanOrEqual(900);
    expect(gaps[2]).toBeGreaterThanOrEqual(1_900);

    // Five attempts 1, 2, 4 and 8 s apart.
    const deadLettered = await poll('the dead letter', async () => {
      const answer = await call(deliveryUrl(deliveryOf.deadLettered), { token: apiToken });
      return answer.body?.data?.status === 'dead_letter' ? answer.body.data : undefined;
    });
    expect(deadLettered).toMatchObject({ attempt_count: 5, last_status_code: 500 });
    expect(requestsFor(deliveryOf.deadLettered)).toHaveLength(5);
  });

  it('finds the deliveries by WebhookId in Temporal, through the server and through its Web UI', async () => {
    const connection = await connectClient(cluster.status);
    try {
      const client = new Client({ connection });
      const ids = await poll('visibility', async () => {
        const found: string[] = [];
        for await (const execution of client.workflow.list({ query: `WebhookId = "${webhookId}"` })) found.push(execution.workflowId);
        return found.length === 3 ? found.sort() : undefined;
      });
      expect(ids).toEqual(Object.values(deliveryOf).sort());
      const deadLettered = await poll('DeliveryStatus in visibility', async () => {
        const found: string[] = [];
        for await (const execution of client.workflow.list({ query: `WebhookId = "${webhookId}" AND DeliveryStatus = "dead_letter"` })) {
          found.push(execution.workflowId);
        }
        return found.length === 1 ? found : undefined;
      });
      expect(deadLettered).toEqual([deliveryOf.deadLettered]);
    } finally {
      await connection.close();
    }
    const query = encodeURIComponent(`WebhookId = "${webhookId}"`);
    const listed = (await (await fetch(`${cluster.status.ui}/api/v1/namespaces/default/workflows?query=${query}`)).json()) as {
      executions: { execution: { workflowId: string } }[];
    };
    expect(listed.executions.map((e) => e.execution.workflowId).sort()).toEqual(Object.values(deliveryOf).sort());
  });

  it('delivers a dead-lettered delivery after a manual retry through the other API replica', async () => {
    const [api0, api1] = cluster.status.api as [string, string];
    receiver.behave(() => ({ status: 200 }));
    const retry = await call(`${api1}/api-gateway/v2/webhooks/${webhookId}/deliveries/${deliveryOf.deadLettered}/retry`, {
      method: 'POST',
      token: apiToken,
    });
    expect(retry.status).toBe(202);
    const delivered = await poll('the retried dead letter', async () => {
      const answer = await call(`${api0}/api-gateway/v2/webhooks/${webhookId}/deliveries/${deliveryOf.deadLettered}`, { token: apiToken });
      return answer.body?.data?.status === 'delivered' ? answer.body.data : undefined;
    });
    expect(delivered.attempt_count).toBe(6);
    const last = requestsFor(deliveryOf.deadLettered).at(-1)!;
    expect(verifyWebhook({ rawBody: last.rawBody, headers: last.headers, secret }).id).toBe(deliveryOf.deadLettered);
  });

  it('traces each delivery as one trace across the replicas: published on an API replica, run by the workers, retried through the other API replica', async () => {
    const pidsOf = (role: string) => cluster.status.processes.filter((p) => p.role === role).map((p) => p.pid);
    const [api0, api1] = pidsOf('api') as [number, number];
    const workers = pidsOf('worker');
    // Each replica exports in its own batches: the checks are made again until every span they need has come.
    await vi.waitFor(
      () => {
        const spans = collector.spans();
        // Published on API replica 0; the workflow and its three attempts on the worker replicas; one trace.
        const retried = expectOneDeliveryTrace(spans, deliveryOf.retried, 3);
        expect(retried.server.resource).toMatchObject({ 'service.name': 'webhooks-api', 'process.pid': api0 });
        expect(retried.start.resource).toMatchObject({ 'service.name': 'webhooks-api', 'process.pid': api0 });
        expect(retried.run.resource['service.name']).toBe('webhooks-worker');
        const attempts = attemptSpans(spans, deliveryOf.retried);
        expect(attempts.map((span) => [span.attributes['webhooks.attempt.outcome'], span.attributes['http.response.status_code']])).toEqual([
          ['http_error', 503],
          ['http_error', 503],
          ['succeeded', 200],
        ]);
        for (const span of [retried.run, ...attempts]) expect(workers).toContain(span.resource['process.pid']);

        // The dead letter in its delivery's trace; the retry, sent by API replica 1, in the API call's trace, linked to it.
        const deadLettered = expectOneDeliveryTrace(spans, deliveryOf.deadLettered, 6);
        const deadLetter = only(spansOf(spans, deliveryOf.deadLettered), 'RunActivity:markDeadLetter');
        expect(deadLetter).toMatchObject({ traceId: deadLettered.traceId, resource: { 'service.name': 'webhooks-worker' } });
        expect(deadLetter.attributes['webhooks.delivery.status']).toBe('dead_letter');
        const signalled = only(spansOf(spans, deliveryOf.deadLettered), 'SignalWithStartWorkflow:deliveryWorkflow');
        expect(signalled.resource).toMatchObject({ 'service.name': 'webhooks-api', 'process.pid': api1 });
        const retryCall = spans.find((span) => span.spanId === signalled.parentSpanId)!;
        expect(retryCall).toMatchObject({ name: 'POST /api-gateway/v2/webhooks/:id/deliveries/:delivery_id/retry', traceId: signalled.traceId });
        const handled = only(
          spans.filter((span) => span.parentSpanId === signalled.spanId),
          'HandleSignal:retry',
        );
        expect(handled.resource['service.name']).toBe('webhooks-worker');
        expect(handled.links).toEqual([{ traceId: deadLettered.traceId, spanId: deadLettered.run.spanId }]);
      },
      { timeout: 60_000, interval: 1_000 },
    );
  });

  it('serves the customer portal on every API replica: a CLI link opened on one, used on the other, in Chromium', async () => {
    const [api0, api1] = cluster.status.api as [string, string];
    receiver.behave(() => ({ status: 200 }));
    const { stdout } = await run('npm', ['run', '--silent', 'cli', '--', 'portal', 'link', '--project', projectId, '--json'], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...cluster.env, DATABASE_URL: cluster.status.postgres, WEBHOOKS_API_URL: api0 },
    });
    const link = JSON.parse(stdout) as { url: string; api_key_id: string };
    expect(link.url.startsWith(`${api0}/portal/enter?token=plt_`)).toBe(true);
    expect(link.api_key_id).toBe(apiKeyId);

    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await openPortalLink(page, link.url);
      expect(page.url()).toBe(`${api0}/portal`);
      // The session lives in the database: the other replica knows it (cookies are per host, not per port).
      await page.goto(`${api1}/portal/webhooks/${webhookId}`);
      await expect(page.locator('h1').textContent()).resolves.toBe(receiver.url);
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.locator('#delivery .badge-delivered').waitFor({ timeout: 60_000 });
      portalDelivery = /deliveries\/(dlv_[0-9a-z]{26})/.exec(page.url())![1]!;
      const [request] = requestsFor(portalDelivery);
      expect(verifyWebhook({ rawBody: request!.rawBody, headers: request!.headers, secret }).data.request_id).toMatch(/^test_/);
    } finally {
      await browser.close();
    }
  });

  describe.runIf(TLS)("the frontend's mutual TLS (CLUSTER_TLS)", () => {
    /** Certificates of another CA, made as the cluster makes its own. */
    let foreignDir: string;
    const tlsFile = (name: 'TEMPORAL_TLS_SERVER_CA_CERT_PATH' | 'TEMPORAL_TLS_CLIENT_CERT_PATH' | 'TEMPORAL_TLS_CLIENT_KEY_PATH') =>
      cluster.status.temporalEnv[name]!;

    beforeAll(async () => {
      foreignDir = mkdtempSync(path.join(os.tmpdir(), 'webhooks-foreign-ca-'));
      await run('sh', [path.join(REPO_ROOT, 'deploy/temporal/make-certificates.sh'), foreignDir]);
    });
    afterAll(() => rmSync(foreignDir, { recursive: true, force: true }));

    it('refuses a client without the client certificate, and one in plaintext', async () => {
      const address = cluster.status.temporal;
      const serverRootCACertificate = readFileSync(tlsFile('TEMPORAL_TLS_SERVER_CA_CERT_PATH'));
      const clientCertPair = { crt: readFileSync(tlsFile('TEMPORAL_TLS_CLIENT_CERT_PATH')), key: readFileSync(tlsFile('TEMPORAL_TLS_CLIENT_KEY_PATH')) };
      const accepted = await NativeConnection.connect({ address, tls: { serverRootCACertificate, serverNameOverride: 'localhost', clientCertPair } });
      await accepted.close();
      // The SDK's own errors vary with how the refusal reaches it (an alert, or the connection closed).
      await expect(NativeConnection.connect({ address, tls: { serverRootCACertificate, serverNameOverride: 'localhost' } })).rejects.toThrow();
      await expect(NativeConnection.connect({ address })).rejects.toThrow();
      // The same refusals, as the service reports them.
      const withoutCertificate = parseConfig({ ...cluster.status.temporalEnv, TEMPORAL_TLS_CLIENT_CERT_PATH: '', TEMPORAL_TLS_CLIENT_KEY_PATH: '' }).temporal;
      const refused = connectToTemporal(address, withoutCertificate, (options) => Connection.connect({ ...options, connectTimeout: 2_000 }));
      await expect(refused).rejects.toThrow(ConfigError);
      await expect(refused).rejects.toThrow(/the server requires a client certificate .*: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH$/);
      const plaintext = connectToTemporal(address, parseConfig({ TEMPORAL_ADDRESS: address }).temporal, (options) => NativeConnection.connect(options));
      await expect(plaintext).rejects.toThrow(/the server requires TLS: set TEMPORAL_TLS=true/);
    });

    it("serves the server's own system worker through it, with the client certificate", async () => {
      const connection = await connectClient(cluster.status);
      try {
        const pollers = await poll('the system worker polling', async () => {
          const { pollers: found } = await connection.workflowService.describeTaskQueue({
            namespace: 'default',
            taskQueue: { name: 'temporal-sys-per-ns-tq' },
            taskQueueType: 1, // workflow
          });
          return found.length > 0 ? found : undefined;
        });
        expect(pollers.length).toBeGreaterThan(0);
      } finally {
        await connection.close();
      }
    });

    it.each<[string, (env: Record<string, string>) => Record<string, string>, RegExp]>([
      [
        'a client certificate of another CA',
        (env) => ({ ...env, TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(foreignDir, 'client.pem'), TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(foreignDir, 'client.key') }),
        /the server refused this service's client certificate \(.*\): check TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/,
      ],
      [
        'no client certificate',
        (env) => ({ ...env, TEMPORAL_TLS_CLIENT_CERT_PATH: '', TEMPORAL_TLS_CLIENT_KEY_PATH: '' }),
        /the server requires a client certificate \(.*\): set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/,
      ],
      [
        "another CA for the server's certificate",
        (env) => ({ ...env, TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(foreignDir, 'ca.pem') }),
        /this service does not trust the server's certificate \(.*\): check TEMPORAL_TLS_SERVER_CA_CERT_PATH/,
      ],
      ['a key that is no key', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_KEY_PATH: env.TEMPORAL_TLS_CLIENT_CERT_PATH! }), /^ {2}TEMPORAL_TLS_CLIENT_KEY_PATH: .* holds no unencrypted PEM private key/m],
    ])('stops an API replica started with %s at start, with one error naming the variables', async (_case, change, message) => {
      const { status } = cluster;
      const [port, metricsPort] = await Promise.all([freePort(), freePort()]);
      const env = {
        ...cluster.env,
        DATABASE_URL: status.postgres,
        SECRET_ENCRYPTION_KEY: readFileSync(path.join(cluster.dataDir, 'secret-encryption.key'), 'utf8').trim(),
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        LOG_LEVEL: 'warn',
        ...change(status.temporalEnv),
      };
      const result = await run(process.execPath, [...serviceNodeFlags(), 'src/main.ts', 'api'], { cwd: REPO_ROOT, env, timeout: 120_000 }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error: { code?: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
      );
      expect(result.code, result.stdout).toBe(1);
      expect(result.stderr).toMatch(message);
      // One message, nothing else: no stack trace, no log line.
      const lines = result.stderr.trim().split('\n');
      expect(lines[0]).toMatch(/^(cannot connect to Temporal at 127\.0\.0\.1:\d+ \(TEMPORAL_ADDRESS\): |Invalid configuration:$)/);
      expect(lines.filter((line) => !line.startsWith('  '))).toHaveLength(1);
      expect(result.stdout).toBe('');
    });
  });

  it('stops everything with down: no process left, no port bound', async () => {
    const { processes } = cluster.status;
    const layout = JSON.parse(readFileSync(path.join(cluster.dataDir, 'cluster', 'state.json'), 'utf8')).layout as ClusterLayout;
    const result = await cluster.cli(['down']);
    expect(result.code, result.stderr).toBe(0);
    for (const { role, pid } of processes) {
      const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
      // Gone, or a zombie whose parent has not reaped it yet (it holds nothing).
      expect(stat === '' || / Z /.test(stat), `${role} pid ${pid}: ${stat}`).toBe(true);
    }
    const bound = [];
    for (const { port, role } of boundPorts(layout)) if (!(await portIsFree(port))) bound.push(`${role}:${port}`);
    expect(bound).toEqual([]);
    const status = await cluster.cli(['status', '--json']);
    expect(status.code).toBe(3);
    expect(JSON.parse(status.stdout).processes).toEqual([]);
  });

  it('keeps the data on a second up: webhooks, deliveries and Temporal histories', async () => {
    const certificates = () => Object.values(cluster.status.temporalEnv).filter((value) => value.endsWith('.pem')).map((file) => readFileSync(file, 'utf8'));
    const certificatesBefore = certificates();
    const status = await cluster.up();
    // With CLUSTER_TLS: the same certificates, made once.
    expect(certificates()).toEqual(certificatesBefore);
    expect(status.stopped).toEqual([]);
    const [, api1] = status.api as [string, string];
    const webhook = await call(`${api1}/api-gateway/v2/webhooks/${webhookId}`, { token: apiToken });
    expect(webhook.status).toBe(200);
    const listed = await call(`${api1}/api-gateway/v2/webhooks/${webhookId}/deliveries`, { token: apiToken });
    expect(listed.body.data.map((d: { id: string; status: string }) => `${d.id}:${d.status}`).sort()).toEqual(
      [...Object.values(deliveryOf), portalDelivery].map((id) => `${id}:delivered`).sort(),
    );
    const connection = await connectClient(status);
    try {
      const description = await new Client({ connection }).workflow.getHandle(deliveryOf.plain).describe();
      expect(description.status.name).toBe('COMPLETED');
    } finally {
      await connection.close();
    }
  });

  it('refuses to start with DATABASE_URL or TEMPORAL_ADDRESS set, naming them', async () => {
    const result = await cluster.cli(['up'], { TEMPORAL_ADDRESS: 'elsewhere:7233' });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('DATABASE_URL and TEMPORAL_ADDRESS must be unset');
  });
});
