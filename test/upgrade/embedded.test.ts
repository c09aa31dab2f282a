import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WORKFLOWS_PATH } from '../../src/temporal/worker.ts';
import { verifyWebhook } from '../../src/receiver/index.ts';
import { embeddedEnv, freePorts, killStarted, lastLines, startService, waitForExit, waitForReady, type GroupProcess } from '../support/embedded-service.ts';
import { docauthData } from '../support/event-data.ts';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.ts';
import { prepareRelease, previousRelease, runReleaseCli, startRelease, type Release } from '../support/releases.ts';

const projectRoot = path.resolve(import.meta.dirname, '../..');

/*
 * An upgrade with deliveries in flight, on the embedded stack (`npm start`: PGlite and the
 * Temporal dev server, both keeping their data in DATA_DIR). The previous release (releases.json)
 * runs from its own code on a fresh data directory until it has deliveries in every state an
 * upgrade can meet:
 * - dead-lettered, waiting for a manual retry;
 * - between automatic retries;
 * - waiting for a place at a busy endpoint (ENDPOINT_MAX_IN_FLIGHT=1, one request hanging);
 * - part of a running bulk retry.
 * Then it is stopped (SIGTERM, as a deploy does) and the working tree starts on the same data:
 * its migrations run on the old schema, its workers replay the old release's open workflows. The
 * customer's endpoints answer 200 from then on; every delivery must end delivered (the dead
 * letters after a manual retry through the API), with a signature that verifies, none lost.
 *
 * Before the stop, the histories the old release recorded are replayed on the working tree's
 * workflow code, so a non-determinism is named at once rather than seen as a delivery that never
 * ends. With UPDATE_HISTORIES=1 they are also written to test/fixtures/histories/, where the
 * quick suite replays them (test/replay.test.ts).
 */

const V2 = '/api-gateway/v2';
const PRODUCER_TOKEN = 'upgrade-test-producer-token-0123456789abcdef';
/** The old release's SIGTERM drains its sends, a hanging one up to DELIVERY_TIMEOUT_MS (30 s). */
const OLD_RELEASE_STOP_MS = 90_000;
/** Slow enough that the bulk retry is still running when the release stops. */
const BULK_RETRY_RATE = '0.2';
const SCENARIOS = ['dead', 'retrying', 'busy', 'bulk'] as const;
type Scenario = (typeof SCENARIOS)[number];
/** What each scenario's deliveries went through on the old release, as their history files say. */
const SCENARIO_HISTORY_NAMES: Record<Scenario, string> = {
  dead: 'delivery-dead-letter-waiting-for-retry',
  retrying: 'delivery-between-automatic-retries',
  busy: 'delivery-at-a-busy-endpoint',
  bulk: 'delivery-in-a-running-bulk-retry',
};
const HISTORIES_DIR = path.join(projectRoot, 'test/fixtures/histories');

interface Project {
  token: string;
  webhookId: string;
  secret: string;
  deliveryIds: string[];
}

let tmp: string;
let receiver: HttpsReceiver;
let release: Release;
let releaseDir: string;
let workflowBundle: { code: string };
/** Whether the endpoints have recovered: before, each scenario's endpoint fails as the scenario needs. */
let recovered = false;

beforeAll(async () => {
  release = previousRelease();
  releaseDir = prepareRelease(release);
  workflowBundle = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: undefined });
  tmp = await mkdtemp(path.join(os.tmpdir(), 'upgrade-'));
  receiver = await startHttpsReceiver();
  receiver.behave((request) => {
    if (recovered) return { status: 200 };
    const scenario = request.path.split('/').pop() as Scenario;
    if (scenario === 'busy') return 'hang';
    return { status: 500 };
  });
}, 300_000);
afterEach(killStarted);
afterAll(async () => {
  await receiver?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** The history so far of every workflow `ids` names, by a file name saying what each went through. */
async function fetchHistories(temporalPort: number, ids: Map<string, string>): Promise<Map<string, temporal.api.history.v1.IHistory>> {
  const connection = await Connection.connect({ address: `127.0.0.1:${temporalPort}` });
  try {
    const client = new Client({ connection });
    const histories = new Map<string, temporal.api.history.v1.IHistory>();
    for (const [id, name] of ids) histories.set(name, await client.workflow.getHandle(id).fetchHistory());
    return histories;
  } finally {
    await connection.close();
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, service: GroupProcess): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${timeoutMs / 1000} s:\n${lastLines(service.output())}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

describe('upgrading from the previous release with deliveries in flight (embedded stack)', () => {
  it(
    'ends every delivery delivered on the new code: dead letters retried by hand, retries, waits at a busy endpoint, a running bulk retry',
    async () => {
      const ports = await freePorts();
      const env: NodeJS.ProcessEnv = {
        ...embeddedEnv(path.join(tmp, 'data'), ports),
        EVENT_PRODUCER_TOKEN: PRODUCER_TOKEN,
        DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
        DELIVERY_CA_FILE: receiver.certFile,
        ENDPOINT_MAX_IN_FLIGHT: '1',
        BULK_RETRY_RATE,
        TEMPORAL_CLI_PATH: path.join(projectRoot, '.tools/bin/temporal'),
      };
      const api = `http://127.0.0.1:${ports.api}`;
      const call = async <T>(token: string, method: string, route: string, body?: unknown) => {
        const response = await fetch(`${api}${route}`, {
          method,
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
          ...(body !== undefined && { body: JSON.stringify(body) }),
        });
        return { status: response.status, body: (await response.json().catch(() => undefined)) as { data: T } };
      };
      const deliveries = (project: Project) =>
        call<{ id: string; status: string; attempt_count: number }[]>(project.token, 'GET', `${V2}/webhooks/${project.webhookId}/deliveries`).then(
          (answer) => answer.body.data,
        );
      const publish = async (projectId: string, project: Project, count: number) => {
        for (let i = 0; i < count; i += 1) {
          const answer = await call<{ delivery_ids: string[] }>(PRODUCER_TOKEN, 'POST', '/internal/v1/events', {
            project_id: projectId,
            event: 'docauth.completed',
            data: docauthData(),
          });
          expect(answer.status, JSON.stringify(answer.body)).toBe(202);
          project.deliveryIds.push(...answer.body.data.delivery_ids);
        }
      };

      // The previous release, from nothing.
      const old = startRelease(releaseDir, env);
      await waitForReady(old, ports.api);
      const projects = {} as Record<Scenario, Project>;
      for (const scenario of SCENARIOS) {
        const key = JSON.parse(runReleaseCli(releaseDir, env, ['keys', 'create', '--project', `upgrade-${scenario}`, '--services', 'webhooks', '--json'])) as {
          id: string;
          token: string;
        };
        const created = await call<{ id: string; secret: string }>(key.token, 'POST', `${V2}/webhooks`, {
          api_key_id: key.id,
          url: receiver.url.replace(/\/hooks$/, `/hooks/${scenario}`),
          events: ['docauth.completed'],
        });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        projects[scenario] = { token: key.token, webhookId: created.body.data.id, secret: created.body.data.secret, deliveryIds: [] };
      }

      // Dead letters: two for a manual retry, four for the bulk retry (1 + 2 + 4 + 8 s of backoff).
      await publish('upgrade-dead', projects.dead, 2);
      await publish('upgrade-bulk', projects.bulk, 4);
      for (const scenario of ['dead', 'bulk'] as const) {
        await until(
          `the ${scenario} deliveries to be dead letters on ${release.version}`,
          async () => ((await deliveries(projects[scenario])).every((d) => d.status === 'dead_letter') ? true : undefined),
          90_000,
          old,
        );
      }
      // A bulk retry paced at BULK_RETRY_RATE; its endpoint still fails, so what it retries goes on retrying.
      const operation = await call<{ id: string }>(projects.bulk.token, 'POST', `${V2}/webhooks/${projects.bulk.webhookId}/deliveries/retry`, {
        status: ['dead_letter'],
      });
      expect(operation.status, JSON.stringify(operation.body)).toBe(202);
      await publish('upgrade-retrying', projects.retrying, 1);
      await publish('upgrade-busy', projects.busy, 2);
      await until(
        'a delivery between automatic retries, one hanging at the busy endpoint, and the bulk retry under way',
        async () => {
          const [retrying] = await deliveries(projects.retrying);
          const operationNow = await call<{ status: string; retried: number }>(
            projects.bulk.token,
            'GET',
            `${V2}/webhooks/${projects.bulk.webhookId}/operations/${operation.body.data.id}`,
          );
          const busyOpen = receiver.requests.filter((r) => r.path.endsWith('/busy') && r.endedAt === undefined).length;
          const ready =
            retrying?.status === 'failed' && retrying.attempt_count >= 2 && busyOpen === 1 && operationNow.body.data.status === 'running' && operationNow.body.data.retried >= 1;
          return ready ? true : undefined;
        },
        30_000,
        old,
      );
      const [retryingAtStop] = await deliveries(projects.retrying);
      expect(retryingAtStop!.status).toBe('failed');

      const workflows = new Map<string, string>([[operation.body.data.id, `v${release.version}-bulk-retry-running`]]);
      for (const scenario of SCENARIOS) {
        for (const [i, deliveryId] of projects[scenario].deliveryIds.entries()) workflows.set(deliveryId, `v${release.version}-${SCENARIO_HISTORY_NAMES[scenario]}-${i + 1}`);
      }
      const histories = await fetchHistories(ports.temporal, workflows);

      // The deploy: the old release stops (it drains first: the hanging send ends at its 30 s
      // limit), then the working tree starts on the same data.
      old.child.kill('SIGTERM');
      const stopped = await Promise.race([old.exited, new Promise<undefined>((resolve) => setTimeout(resolve, OLD_RELEASE_STOP_MS))]);
      expect(stopped, `the old release did not stop within ${OLD_RELEASE_STOP_MS / 1000} s:\n${lastLines(old.output())}`).toMatchObject({ code: 0 });
      for (const [name, history] of histories) await Worker.runReplayHistory({ workflowBundle }, history, name);
      if (process.env['UPDATE_HISTORIES'] === '1') {
        for (const [name, history] of histories) await writeFile(path.join(HISTORIES_DIR, `${name}.pb`), temporal.api.history.v1.History.encode(history).finish());
      }
      recovered = true;
      receiver.answerHanging(200);
      const upgraded = startService(env);
      await waitForReady(upgraded, ports.api);

      // The dead letters wait for the customer: retried by hand, through the new API.
      for (const deliveryId of projects.dead.deliveryIds) {
        const retried = await call(projects.dead.token, 'POST', `${V2}/webhooks/${projects.dead.webhookId}/deliveries/${deliveryId}/retry`);
        expect(retried.status, JSON.stringify(retried.body)).toBe(202);
      }
      for (const scenario of SCENARIOS) {
        await until(
          `every ${scenario} delivery delivered after the upgrade`,
          async () => ((await deliveries(projects[scenario])).every((d) => d.status === 'delivered') ? true : undefined),
          120_000,
          upgraded,
        );
        const listed = await deliveries(projects[scenario]);
        expect(listed.map((d) => d.id).sort()).toEqual([...projects[scenario].deliveryIds].sort());
      }
      const finishedOperation = await until(
        'the bulk retry to complete after the upgrade',
        async () => {
          const answer = await call<{ status: string; matched: number; retried: number; skipped: number }>(
            projects.bulk.token,
            'GET',
            `${V2}/webhooks/${projects.bulk.webhookId}/operations/${operation.body.data.id}`,
          );
          return answer.body.data.status === 'running' ? undefined : answer.body.data;
        },
        120_000,
        upgraded,
      );
      expect(finishedOperation).toMatchObject({ status: 'completed', matched: 4, retried: 4 });

      // Each delivery reached its endpoint with a 200 and a signature made with its webhook's secret.
      for (const scenario of SCENARIOS) {
        const project = projects[scenario];
        const answered = receiver.requests.filter((r: ReceivedRequest) => r.path.endsWith(`/${scenario}`) && r.endedAt !== undefined);
        const deliveredIds = new Set(
          answered.flatMap((request) => {
            const id = request.headers['x-service-delivery-id'];
            verifyWebhook({ rawBody: request.rawBody, headers: request.headers, secret: project.secret, toleranceSeconds: 3600 });
            return typeof id === 'string' ? [id] : [];
          }),
        );
        for (const deliveryId of project.deliveryIds) expect(deliveredIds.has(deliveryId), `${scenario}: ${deliveryId} reached its endpoint`).toBe(true);
      }

      upgraded.child.kill('SIGTERM');
      expect(await waitForExit(upgraded)).toMatchObject({ code: 0 });
    },
    600_000,
  );
});
