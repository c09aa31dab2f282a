import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { generateEncryptionKey, randomToken } from '../../src/secrets/crypto.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { docauthData } from '../support/harness.ts';
import { killStarted, lastLines, startService, waitForExit, waitForReady, type GroupProcess } from '../support/embedded-service.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { freePort } from '../support/ports.ts';
import { deadlineIn } from '../support/wait.ts';

const V2 = '/api-gateway/v2';
const DELIVERED_TIMEOUT_MS = 60_000;
/** Webhooks the event goes to: one more than the worker caches (WORKER_MAX_CACHED_WORKFLOWS, at the least the SDK allows). */
const WEBHOOKS = 3;
const CACHED_WORKFLOWS = WEBHOOKS - 1;
const REPAIR_RUN_TIMEOUT_MS = 30_000;

/** What each role of the service served on `/metrics` once an event had been delivered. */
export interface ScrapedRoles {
  api: string;
  worker: string;
}

/** The service as production runs it: an API process and a worker process on one database and Temporal. */
export interface RunningService {
  /** Scrapes `/metrics` of both processes (the worker's includes the Temporal SDK's exporter). */
  scrape(): Promise<ScrapedRoles>;
  stop(): Promise<void>;
}

async function fetchText(url: string): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (!response.ok) throw new Error(`GET ${url}: ${response.status}`);
  return response.text();
}

/** Polls `probe` until it answers a value; fails naming `what`, with the last lines `owner` printed. */
async function waitUntil<T>(what: string, probe: () => Promise<T | undefined>, owner: GroupProcess, timeoutMs: number): Promise<T> {
  const deadline = deadlineIn(timeoutMs);
  let last: unknown;
  while (!deadline.passed()) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`waited ${timeoutMs / 1000} s in vain until ${what} (last error: ${String(last)}):\n${lastLines(owner.output())}`);
}

/**
 * Starts `src/main.ts api` and `src/main.ts worker` as their own processes (the suite's Temporal
 * server, a shared test database, an HTTPS receiver with a self-signed certificate), then publishes
 * an event to three webhooks, whose first attempt gets a 500 and every other a 200, so that
 * counters, histograms and the SDK's task metrics have all been recorded; the worker caches two
 * workflows, so one of the three is evicted from its cache (the SDK serves its eviction counter
 * only once it has counted one). Then waits for a run of the repair check, whose local activities
 * record the SDK's local-activity metrics.
 */
export async function startServiceWithDelivery(): Promise<RunningService> {
  const receiver: HttpsReceiver = await startHttpsReceiver();
  let database: SharedTestDatabase | undefined;
  try {
    database = await openSharedTestDatabase();
    const ports = { api: await freePort(), apiMetrics: await freePort(), workerMetrics: await freePort(), sdkMetrics: await freePort() };
    const producerToken = `ptk_${randomToken(32)}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...database.cliEnv,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `observability-${randomUUID()}`,
      WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
      SECRET_ENCRYPTION_KEY: generateEncryptionKey(),
      EVENT_PRODUCER_TOKEN: producerToken,
      DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
      DELIVERY_CA_FILE: receiver.certFile,
      LOG_LEVEL: 'warn',
      // The repair check runs within seconds, so the SDK's local-activity metrics are always served.
      REPAIR_INTERVAL: '5s',
    };
    const api = startService({ ...env, PORT: String(ports.api), METRICS_PORT: String(ports.apiMetrics) }, ['api']);
    const worker = startService(
      { ...env, METRICS_PORT: String(ports.workerMetrics), TEMPORAL_SDK_METRICS_PORT: String(ports.sdkMetrics), WORKER_MAX_CACHED_WORKFLOWS: String(CACHED_WORKFLOWS) },
      ['worker'],
    );
    const apiUrl = `http://127.0.0.1:${ports.api}`;
    const apiMetricsUrl = `http://127.0.0.1:${ports.apiMetrics}/metrics`;
    const workerMetricsUrl = `http://127.0.0.1:${ports.workerMetrics}/metrics`;
    await waitForReady(api, ports.api);
    await waitUntil('the worker serves /metrics with the SDK metrics', async () => {
      const text = await fetchText(workerMetricsUrl);
      return text.includes('temporal_worker_task_slots_available') ? text : undefined;
    }, worker, 90_000);

    const projectId = `observability-${randomUUID()}`;
    const { key, token } = await createApiKey(database.db, { projectId, services: ['webhooks'] });
    let calls = 0;
    receiver.behave(() => ({ status: ++calls === 1 ? 500 : 200 }));
    const call = async (method: string, path: string, bearer: string, body: unknown) => {
      const response = await fetch(`${apiUrl}${path}`, {
        method,
        headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as { data: Record<string, any> } };
    };
    const webhookIds: string[] = [];
    for (let index = 0; index < WEBHOOKS; index++) {
      const created = await call('POST', `${V2}/webhooks`, token, { api_key_id: key.id, url: receiver.url, events: ['docauth.completed'] });
      if (created.status !== 201) throw new Error(`creating a webhook answered ${created.status}: ${JSON.stringify(created.body)}`);
      webhookIds.push(created.body.data.id as string);
    }
    const published = await call('POST', '/internal/v1/events', producerToken, { project_id: projectId, event: 'docauth.completed', data: docauthData() });
    if (published.status !== 202) throw new Error(`publishing answered ${published.status}: ${JSON.stringify(published.body)}`);
    const deliveries = (published.body.data.delivery_ids as string[]).length;
    if (deliveries !== WEBHOOKS) throw new Error(`publishing made ${deliveries} deliveries, not ${WEBHOOKS}`);
    await waitUntil('the deliveries are delivered', async () => {
      for (const webhookId of webhookIds) {
        const response = await fetch(`${apiUrl}${V2}/webhooks/${webhookId}/deliveries`, { headers: { Authorization: `Bearer ${token}` } });
        const listed = ((await response.json()) as { data?: { status?: string }[] }).data ?? [];
        if (listed.length !== 1 || listed[0]!.status !== 'delivered') return undefined;
      }
      return true;
    }, worker, DELIVERED_TIMEOUT_MS);
    await waitUntil('the worker has evicted a workflow from its full cache', async () => {
      const text = await fetchText(workerMetricsUrl);
      return /^temporal_sticky_cache_total_forced_eviction_total\{/m.test(text) ? text : undefined;
    }, worker, DELIVERED_TIMEOUT_MS);
    await waitUntil('the repair check has run its local activities', async () => {
      const text = await fetchText(workerMetricsUrl);
      return /^temporal_local_activity_total_total\{.*activity_type="repairStuckDeliveries"/m.test(text) ? text : undefined;
    }, worker, REPAIR_RUN_TIMEOUT_MS);

    const sharedDatabase = database;
    return {
      async scrape() {
        return { api: await fetchText(apiMetricsUrl), worker: await fetchText(workerMetricsUrl) };
      },
      async stop() {
        for (const role of [api, worker]) role.child.kill('SIGTERM');
        await Promise.all([waitForExit(api), waitForExit(worker)]);
        await sharedDatabase.close();
        await receiver.close();
      },
    };
  } catch (error) {
    killStarted();
    await database?.close();
    await receiver.close();
    throw error;
  }
}
