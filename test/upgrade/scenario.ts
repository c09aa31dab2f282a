import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { expect } from 'vitest';
import { verifyWebhook } from '../../src/receiver/index.ts';
import { WORKFLOWS_PATH } from '../../src/temporal/worker.ts';
import { waitFor } from '../support/wait.ts';
import { docauthData } from '../support/event-data.ts';
import { call as request } from '../support/http.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import type { Release } from '../support/releases.ts';

/*
 * An upgrade with deliveries in flight, the same on every topology. The previous release runs
 * from its own code on fresh data until it has deliveries in every state an upgrade can meet:
 * - dead-lettered, waiting for a manual retry;
 * - between automatic retries;
 * - waiting for a place at a busy endpoint (ENDPOINT_MAX_IN_FLIGHT=1, one request hanging);
 * - part of a running bulk retry.
 * The histories it recorded so far are fetched. It is stopped as a deploy stops it, the histories
 * are replayed on the working tree's workflow code (so a non-determinism is named at once rather
 * than seen as a delivery that never ends), and the working tree starts on the same data. The
 * customer's endpoints answer 200 from then on: every delivery must end delivered (the dead
 * letters after a manual retry through the API), with signatures that verify, none lost.
 * With UPDATE_HISTORIES=1 the histories are also written to test/fixtures/histories/, where the
 * quick suite replays them (test/replay.test.ts).
 */

const projectRoot = path.resolve(import.meta.dirname, '../..');
const HISTORIES_DIR = path.join(projectRoot, 'test/fixtures/histories');
const V2 = '/api-gateway/v2';
const PRODUCER_TOKEN = 'upgrade-test-producer-token-0123456789abcdef';
const SCENARIOS = ['dead', 'retrying', 'busy', 'bulk'] as const;
type Scenario = (typeof SCENARIOS)[number];
/** What each scenario's deliveries went through on the old release, as their history files say. */
const SCENARIO_HISTORY_NAMES: Record<Scenario, string> = {
  dead: 'delivery-dead-letter-waiting-for-retry',
  retrying: 'delivery-between-automatic-retries',
  busy: 'delivery-at-a-busy-endpoint',
  bulk: 'delivery-in-a-running-bulk-retry',
};

/** One topology's way of running the old release, then the working tree, on the same data. */
export interface UpgradeTopology {
  /** The API's origin, the same before and after the upgrade (known once the old release runs). */
  api(): string;
  /** Temporal's frontend address, the same before and after. */
  temporalAddress(): string;
  /** `npm run cli -- <args>` of the old release, against its database: its standard output. */
  oldCli(args: string[]): Promise<string>;
  /** Starts the old release on fresh data; resolves once its API is ready. */
  startOld(settings: NodeJS.ProcessEnv): Promise<void>;
  /** Stops it as a deploy does; fails when it does not stop. */
  stopOld(): Promise<void>;
  /** Starts the working tree on the same data; resolves once its API is ready. */
  startNew(): Promise<void>;
  /** The last lines the running code logged, for failure messages. */
  logs(): string;
}

interface Project {
  token: string;
  webhookId: string;
  secret: string;
  deliveryIds: string[];
}

/** An HTTPS receiver whose paths fail as each scenario needs until `recover()`, then answer 200. */
export async function startScenarioReceiver(): Promise<HttpsReceiver & { recover(): void }> {
  const receiver = await startHttpsReceiver();
  let recovered = false;
  receiver.behave((request) => {
    if (recovered) return { status: 200 };
    return request.path.endsWith('/busy') ? 'hang' : { status: 500 };
  });
  return Object.assign(receiver, {
    recover() {
      recovered = true;
      receiver.answerHanging(200);
    },
  });
}

/** The settings both releases run with: the receiver trusted, one send in flight per endpoint, a slow bulk retry. */
export function scenarioSettings(receiver: HttpsReceiver): NodeJS.ProcessEnv {
  return {
    EVENT_PRODUCER_TOKEN: PRODUCER_TOKEN,
    DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
    DELIVERY_CA_FILE: receiver.certFile,
    ENDPOINT_MAX_IN_FLIGHT: '1',
    // Slow enough that the bulk retry is still running when the release stops.
    BULK_RETRY_RATE: '0.2',
  };
}

/** The working tree's workflow bundle, made once per file before the clock of a scenario runs. */
export function bundleCurrentWorkflows(): Promise<{ code: string }> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: undefined });
}

/** The history so far of every workflow `ids` names, by a file name saying what each went through. */
async function fetchHistories(address: string, ids: Map<string, string>): Promise<Map<string, temporal.api.history.v1.IHistory>> {
  const connection = await Connection.connect({ address });
  try {
    const client = new Client({ connection });
    const histories = new Map<string, temporal.api.history.v1.IHistory>();
    for (const [id, name] of ids) histories.set(name, await client.workflow.getHandle(id).fetchHistory());
    return histories;
  } finally {
    await connection.close();
  }
}

/** {@link waitFor}, its timeout message followed by what the running code logged. */
function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, topology: UpgradeTopology): Promise<T> {
  return waitFor(what, probe, { timeoutMs, intervalMs: 500 }).catch((error: Error) => {
    throw new Error(`${error.message}\n${topology.logs()}`);
  });
}

/** The management API and the producers' door of whichever release runs. */
function apiOf(topology: UpgradeTopology) {
  const call = async <T>(token: string, method: string, route: string, body?: unknown) => {
    const answer = await request(`${topology.api()}${route}`, { method, token, body });
    if (typeof answer === 'string') throw new Error(`${method} ${route}: no answer (${answer})\n${topology.logs()}`);
    return answer as { status: number; body: { data: T } };
  };
  return {
    call,
    deliveries: (project: Project) =>
      call<{ id: string; status: string; attempt_count: number }[]>(project.token, 'GET', `${V2}/webhooks/${project.webhookId}/deliveries`).then(
        (answer) => answer.body.data,
      ),
    operation: (project: Project, id: string) =>
      call<{ status: string; matched: number; retried: number; skipped: number }>(project.token, 'GET', `${V2}/webhooks/${project.webhookId}/operations/${id}`).then(
        (answer) => answer.body.data,
      ),
    async publish(projectId: string, project: Project, count: number) {
      for (let i = 0; i < count; i += 1) {
        const answer = await call<{ delivery_ids: string[] }>(PRODUCER_TOKEN, 'POST', '/internal/v1/events', {
          project_id: projectId,
          event: 'docauth.completed',
          data: docauthData(),
        });
        expect(answer.status, JSON.stringify(answer.body)).toBe(202);
        project.deliveryIds.push(...answer.body.data.delivery_ids);
      }
    },
  };
}

/** On the old release: a project and a webhook per scenario, then deliveries in every state; returns the bulk retry's id. */
async function leaveDeliveriesInFlight(topology: UpgradeTopology, receiver: HttpsReceiver, release: Release, projects: Record<Scenario, Project>): Promise<string> {
  const api = apiOf(topology);
  for (const scenario of SCENARIOS) {
    const key = JSON.parse(await topology.oldCli(['keys', 'create', '--project', `upgrade-${scenario}`, '--services', 'webhooks', '--json'])) as { id: string; token: string };
    const created = await api.call<{ id: string; secret: string }>(key.token, 'POST', `${V2}/webhooks`, {
      api_key_id: key.id,
      url: receiver.url.replace(/\/hooks$/, `/hooks/${scenario}`),
      events: ['docauth.completed'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    projects[scenario] = { token: key.token, webhookId: created.body.data.id, secret: created.body.data.secret, deliveryIds: [] };
  }

  // Dead letters: two for a manual retry, four for the bulk retry (1 + 2 + 4 + 8 s of backoff).
  await api.publish('upgrade-dead', projects.dead, 2);
  await api.publish('upgrade-bulk', projects.bulk, 4);
  for (const scenario of ['dead', 'bulk'] as const) {
    await until(
      `the ${scenario} deliveries to be dead letters on ${release.version}`,
      async () => ((await api.deliveries(projects[scenario])).every((d) => d.status === 'dead_letter') ? true : undefined),
      90_000,
      topology,
    );
  }
  // A bulk retry paced at BULK_RETRY_RATE; its endpoint still fails, so what it retries goes on retrying.
  const operation = await api.call<{ id: string }>(projects.bulk.token, 'POST', `${V2}/webhooks/${projects.bulk.webhookId}/deliveries/retry`, {
    status: ['dead_letter'],
  });
  expect(operation.status, JSON.stringify(operation.body)).toBe(202);
  await api.publish('upgrade-retrying', projects.retrying, 1);
  await api.publish('upgrade-busy', projects.busy, 2);
  await until(
    'a delivery between automatic retries, one hanging at the busy endpoint, and the bulk retry under way',
    async () => {
      const [retrying] = await api.deliveries(projects.retrying);
      const running = await api.operation(projects.bulk, operation.body.data.id);
      const busyOpen = receiver.requests.filter((r) => r.path.endsWith('/busy') && r.endedAt === undefined).length;
      const ready = retrying?.status === 'failed' && retrying.attempt_count >= 2 && busyOpen === 1 && running.status === 'running' && running.retried >= 1;
      return ready ? true : undefined;
    },
    30_000,
    topology,
  );
  return operation.body.data.id;
}

/** On the working tree: the dead letters retried by hand, then every delivery delivered, signed, none lost. */
async function expectEveryDeliveryDelivered(topology: UpgradeTopology, receiver: HttpsReceiver, projects: Record<Scenario, Project>, operationId: string): Promise<void> {
  const api = apiOf(topology);
  for (const deliveryId of projects.dead.deliveryIds) {
    const retried = await api.call(projects.dead.token, 'POST', `${V2}/webhooks/${projects.dead.webhookId}/deliveries/${deliveryId}/retry`);
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
  }
  for (const scenario of SCENARIOS) {
    await until(
      `every ${scenario} delivery delivered after the upgrade`,
      async () => ((await api.deliveries(projects[scenario])).every((d) => d.status === 'delivered') ? true : undefined),
      120_000,
      topology,
    );
    const listed = await api.deliveries(projects[scenario]);
    expect(listed.map((d) => d.id).sort()).toEqual([...projects[scenario].deliveryIds].sort());
  }
  const finished = await until(
    'the bulk retry to complete after the upgrade',
    async () => {
      const now = await api.operation(projects.bulk, operationId);
      return now.status === 'running' ? undefined : now;
    },
    120_000,
    topology,
  );
  expect(finished).toMatchObject({ status: 'completed', matched: 4, retried: 4 });

  // Each delivery reached its endpoint, and every request to it was signed with its webhook's secret.
  for (const scenario of SCENARIOS) {
    const project = projects[scenario];
    const answered = receiver.requests.filter((r) => r.path.endsWith(`/${scenario}`) && r.endedAt !== undefined);
    const reached = new Set(
      answered.flatMap((request) => {
        verifyWebhook({ rawBody: request.rawBody, headers: request.headers, secret: project.secret, toleranceSeconds: 3600 });
        const id = request.headers['x-service-delivery-id'];
        return typeof id === 'string' ? [id] : [];
      }),
    );
    for (const deliveryId of project.deliveryIds) expect(reached.has(deliveryId), `${scenario}: ${deliveryId} reached its endpoint`).toBe(true);
  }
}

/** The whole upgrade on `topology`: see the comment at the top of this file. */
export async function runUpgradeScenario(
  topology: UpgradeTopology,
  { release, receiver, workflowBundle }: { release: Release; receiver: HttpsReceiver & { recover(): void }; workflowBundle: { code: string } },
): Promise<void> {
  await topology.startOld(scenarioSettings(receiver));
  const projects = {} as Record<Scenario, Project>;
  const operationId = await leaveDeliveriesInFlight(topology, receiver, release, projects);
  const [retryingAtStop] = await apiOf(topology).deliveries(projects.retrying);
  expect(retryingAtStop!.status).toBe('failed');

  const workflows = new Map<string, string>([[operationId, `v${release.version}-bulk-retry-running`]]);
  for (const scenario of SCENARIOS) {
    for (const [i, deliveryId] of projects[scenario].deliveryIds.entries()) workflows.set(deliveryId, `v${release.version}-${SCENARIO_HISTORY_NAMES[scenario]}-${i + 1}`);
  }
  const histories = await fetchHistories(topology.temporalAddress(), workflows);

  await topology.stopOld();
  for (const [name, history] of histories) await Worker.runReplayHistory({ workflowBundle }, history, name);
  if (process.env['UPDATE_HISTORIES'] === '1') {
    for (const [name, history] of histories) await writeFile(path.join(HISTORIES_DIR, `${name}.pb`), temporal.api.history.v1.History.encode(history).finish());
  }
  receiver.recover();
  await topology.startNew();
  await expectEveryDeliveryDelivered(topology, receiver, projects, operationId);
}
