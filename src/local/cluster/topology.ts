/**
 * `npm run cluster -- up | down | status`: the production topology on one machine, without
 * Docker. PostgreSQL, the Temporal server on it, the Web UI, and the service's API and worker
 * replicas (each `npm run api` / `npm run worker`), all in DATA_DIR/cluster, all detached so
 * they outlive the command; the state file records who runs.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureTemporalTools } from '../temporal-tools.mjs';
import type { Config } from '../../config.ts';
import { sharedReplicaSecrets } from '../../secrets/installation.ts';
import { DEFAULT_DELIVERY_TIMEOUT_MS, workerDrainMs } from '../../../workflows/send-limits.ts';
import { boundPorts, clusterLayout, REPO_ROOT, type ClusterLayout, type ReplicaCounts } from './layout.ts';
import {
  ensurePostgresInstalled,
  ensureRolesAndDatabases,
  loadCredentials,
  newestBinDir,
  runningPostgres,
  startPostgres,
  stopPostgres,
  webhooksDatabaseUrl,
} from './postgres.ts';
import { isRunning, npmScriptProcess, portIsFree, spawnDetached, stopProcess, waitForHttp, waitUntil, type ProcessRecord } from './processes.ts';
import {
  makeCertificates,
  setUpNamespace,
  setUpSchema,
  startTemporalServer,
  startUi,
  temporalClientEnv,
  waitForTemporalServer,
  type TemporalBinaries,
} from './temporal.ts';

/** History shards of a new cluster (fixed for its life): see docs/architecture.md. */
export const DEFAULT_HISTORY_SHARDS = 4;
export const DEFAULT_REPLICAS: ReplicaCounts = { api: 2, worker: 2 };

/** The Temporal server stores its membership ports in a smallint column (cluster_membership.rpc_port). */
const MAX_TEMPORAL_PORT = 32_767;

/** How long each role gets to stop after SIGTERM before it is killed; a worker's depends on its drain. */
const GRACE_MS: Record<string, number> = { api: 15_000, ui: 5_000, temporal: 30_000 };

/** A worker's time to exit once its drain is over. */
const WORKER_EXIT_MS = 10_000;

interface ClusterState {
  layout: ClusterLayout;
  historyShards: number;
  counts: ReplicaCounts;
  /** The longest drain of the workers started (DELIVERY_TIMEOUT_MS's); absent in a state written before it was kept. */
  workerDrainMs?: number;
  /** Temporal, the UI and the replicas; PostgreSQL is known by its postmaster.pid. */
  processes: ProcessRecord[];
}

/** What `status --json` prints. */
export interface ClusterStatus {
  dataDir: string;
  api: string[];
  temporal: string;
  /** What a client of that Temporal sets: TEMPORAL_ADDRESS and, with CLUSTER_TLS, the TEMPORAL_TLS_* of the client certificate. */
  temporalEnv: Record<string, string>;
  ui: string;
  postgres: string;
  temporalMetrics: string;
  historyShards: number;
  /** Running processes; `pid` of `api` and `worker` is the service's node process. */
  processes: { role: string; index: number; pid: number }[];
  /** Processes of the topology that are not running. */
  stopped: { role: string; index: number }[];
}

export type Log = (line: string) => void;

/** How long a replica of `role` gets to stop: a worker, its drain (the longest of those started) and time to exit. */
export function stopGraceMs(role: string, drainMs: number = workerDrainMs(DEFAULT_DELIVERY_TIMEOUT_MS)): number {
  return role === 'worker' ? drainMs + WORKER_EXIT_MS : (GRACE_MS[role] ?? 15_000);
}

function stateFile(config: Config): string {
  return path.join(config.dataDir, 'cluster', 'state.json');
}

function readState(config: Config): ClusterState | undefined {
  const file = stateFile(config);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ClusterState) : undefined;
}

function writeState(state: ClusterState): void {
  const temporary = `${state.layout.stateFile}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(temporary, state.layout.stateFile);
}

/** One `up` or `down` at a time per DATA_DIR. */
async function withLock<T>(config: Config, action: () => Promise<T>): Promise<T> {
  const root = path.join(config.dataDir, 'cluster');
  mkdirSync(root, { recursive: true });
  const lockFile = path.join(root, 'lock');
  for (;;) {
    try {
      writeFileSync(lockFile, String(process.pid), { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(lockFile, 'utf8'));
      let alive = false;
      try {
        process.kill(holder, 0);
        alive = true;
      } catch {
        // stale lock of a process that died
      }
      if (alive && holder !== process.pid) throw new Error(`another \`npm run cluster\` (pid ${holder}) is working on ${config.dataDir}`);
      rmSync(lockFile, { force: true });
    }
  }
  try {
    return await action();
  } finally {
    rmSync(lockFile, { force: true });
  }
}

function record(state: ClusterState, role: string, index: number): ProcessRecord | undefined {
  return state.processes.find((p) => p.role === role && p.index === index);
}

function replace(state: ClusterState, next: ProcessRecord): void {
  state.processes = [...state.processes.filter((p) => !(p.role === next.role && p.index === next.index)), next];
  writeState(state);
}

async function assertFree(layout: ClusterLayout, role: string, index?: number): Promise<void> {
  const ports = boundPorts(layout).filter((p) => p.role === role);
  const mine =
    role === 'api' && index !== undefined
      ? ports.filter((p) => p.port === layout.api[index]!.port || p.port === layout.api[index]!.metricsPort)
      : role === 'worker' && index !== undefined
        ? ports.filter((p) => p.port === layout.workers[index]!.metricsPort || p.port === layout.workers[index]!.sdkMetricsPort)
        : ports;
  for (const { port, variable } of mine) {
    if (!(await portIsFree(port))) {
      throw new Error(`cannot start ${role}: 127.0.0.1:${port} is in use (set ${variable}); is \`npm start\` or another cluster running?`);
    }
  }
}

/** The environment of a service replica: the caller's variables, then what the topology decides. */
function replicaEnv(base: NodeJS.ProcessEnv, layout: ClusterLayout, databaseUrl: string, secrets: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...base,
    ...secrets,
    DATA_DIR: layout.dataDir,
    DATABASE_URL: databaseUrl,
    ...temporalClientEnv(layout),
  };
}

async function startReplica(
  state: ClusterState,
  role: 'api' | 'worker',
  index: number,
  env: NodeJS.ProcessEnv,
  log: Log,
): Promise<void> {
  const { layout } = state;
  await assertFree(layout, role, index);
  const logFile = path.join(layout.logDir, `${role}-${index}.log`);
  const roleEnv =
    role === 'api'
      ? { ...env, PORT: String(layout.api[index]!.port), METRICS_PORT: String(layout.api[index]!.metricsPort) }
      : {
          ...env,
          METRICS_PORT: String(layout.workers[index]!.metricsPort),
          TEMPORAL_SDK_METRICS_PORT: String(layout.workers[index]!.sdkMetricsPort),
        };
  const wrapper = spawnDetached(role, index, 'npm', ['run', role], { cwd: REPO_ROOT, env: roleEnv, logFile });
  const service = await npmScriptProcess(wrapper);
  replace(state, service);
  const url = role === 'api' ? `${layout.api[index]!.url}/readyz` : `http://127.0.0.1:${layout.workers[index]!.metricsPort}/metrics`;
  await waitForHttp(`${role} replica ${index}`, url, service, logFile, 180_000);
  log(`${role} replica ${index} ready (pid ${service.pid})`);
}

/**
 * Brings the topology up, starting only what does not run: a second `up` after a crash
 * restarts what died and keeps the data. Resolves once everything answers.
 */
export async function up(
  config: Config,
  options: { counts: ReplicaCounts; historyShards: number | undefined; env: NodeJS.ProcessEnv },
  log: Log,
): Promise<ClusterStatus> {
  if (config.database.kind === 'postgres' || config.temporal.address) {
    throw new Error('DATABASE_URL and TEMPORAL_ADDRESS must be unset: the cluster runs its own PostgreSQL and Temporal server and sets them for its replicas');
  }
  return withLock(config, async () => {
    const bins = ensureTemporalTools(['cli', 'server', 'ui']) as TemporalBinaries;
    const pgBin = await ensurePostgresInstalled(log);
    const layout = clusterLayout(config, options.counts);
    const highest = Math.max(...Object.values(layout.temporal.ports));
    if (highest > MAX_TEMPORAL_PORT) {
      throw new Error(`TEMPORAL_PORT must be at most ${MAX_TEMPORAL_PORT - 9}: the server uses TEMPORAL_PORT to TEMPORAL_PORT+9 and stores its ports in a smallint column`);
    }
    mkdirSync(layout.logDir, { recursive: true });
    const previous = readState(config);
    if (previous && JSON.stringify(previous.layout) !== JSON.stringify(layout) && previous.processes.some(isRunning)) {
      throw new Error('the cluster runs with other ports, replica counts or CLUSTER_TLS; stop it first: npm run cluster -- down');
    }
    if (previous && options.historyShards !== undefined && options.historyShards !== previous.historyShards) {
      throw new Error(`this cluster was created with ${previous.historyShards} history shards, which cannot change; use another DATA_DIR for ${options.historyShards}`);
    }
    const state: ClusterState = {
      layout,
      historyShards: previous?.historyShards ?? options.historyShards ?? DEFAULT_HISTORY_SHARDS,
      counts: options.counts,
      // Workers started before with a longer DELIVERY_TIMEOUT_MS may still run: the longest drain counts.
      workerDrainMs: Math.max(previous?.workerDrainMs ?? 0, workerDrainMs(config.delivery.timeoutMs)),
      processes: (previous?.processes ?? []).filter(isRunning),
    };
    writeState(state);

    const credentials = loadCredentials(layout);
    if (!runningPostgres(layout)) {
      await assertFree(layout, 'postgres');
      log('starting PostgreSQL…');
      await startPostgres(layout, pgBin, path.join(layout.logDir, 'postgres.log'));
    }
    await ensureRolesAndDatabases(layout, credentials);
    await makeCertificates(layout, path.join(layout.logDir, 'certificates.log'));

    const temporalLog = path.join(layout.logDir, 'temporal.log');
    const bootstrapLog = path.join(layout.logDir, 'bootstrap.log');
    const runningTemporal = record(state, 'temporal', 0);
    if (!runningTemporal) {
      await assertFree(layout, 'temporal');
      log('setting up the Temporal schemas (bootstrap.sh schema)…');
      await setUpSchema(layout, credentials, bins, bootstrapLog);
      log(`starting the Temporal server (${state.historyShards} history shards)…`);
      const server = startTemporalServer(layout, credentials, bins, state.historyShards, temporalLog);
      replace(state, server);
      await waitForTemporalServer(layout, server, temporalLog);
      log('setting up the namespace and search attributes (bootstrap.sh namespace)…');
      await setUpNamespace(layout, config.temporal.namespace, bins, bootstrapLog);
    }
    if (!record(state, 'ui', 0)) {
      await assertFree(layout, 'ui');
      const uiLog = path.join(layout.logDir, 'ui.log');
      const ui = startUi(layout, bins, uiLog);
      replace(state, ui);
      await waitForHttp('the Temporal Web UI', layout.ui.url, ui, uiLog, 120_000);
    }

    const env = replicaEnv(options.env, layout, webhooksDatabaseUrl(layout, credentials), await sharedReplicaSecrets(config));
    const missing = (['api', 'worker'] as const).flatMap((role) =>
      Array.from({ length: options.counts[role] }, (_, index) => ({ role, index })).filter(({ index }) => !record(state, role, index)),
    );
    if (missing.length > 0) log(`starting ${missing.map(({ role, index }) => `${role} ${index}`).join(', ')}…`);
    await Promise.all(missing.map(({ role, index }) => startReplica(state, role, index, env, log)));
    // Replicas beyond the counts asked for (an earlier `up` with more) are stopped.
    const extra = state.processes.filter((p) => (p.role === 'api' || p.role === 'worker') && p.index >= options.counts[p.role]);
    await Promise.all(extra.map((p) => stopProcess(p, stopGraceMs(p.role, state.workerDrainMs))));
    state.processes = state.processes.filter((p) => !extra.includes(p));
    writeState(state);
    return statusOf(state, credentials);
  });
}

function statusOf(state: ClusterState, credentials = loadCredentials(state.layout)): ClusterStatus {
  const { layout } = state;
  const expected = [
    { role: 'postgres', index: 0 },
    { role: 'temporal', index: 0 },
    { role: 'ui', index: 0 },
    ...(['api', 'worker'] as const).flatMap((role) => Array.from({ length: state.counts[role] }, (_, index) => ({ role, index }))),
  ];
  const postgres = runningPostgres(layout);
  const live = [...(postgres ? [postgres] : []), ...state.processes.filter(isRunning)];
  const find = (role: string, index: number) => live.find((p) => p.role === role && p.index === index);
  return {
    dataDir: layout.dataDir,
    api: layout.api.map((api) => api.url),
    temporal: layout.temporal.address,
    temporalEnv: temporalClientEnv(layout),
    ui: layout.ui.url,
    postgres: webhooksDatabaseUrl(layout, credentials),
    temporalMetrics: layout.temporal.metricsUrl,
    historyShards: state.historyShards,
    processes: expected.flatMap(({ role, index }) => {
      const process = find(role, index);
      return process ? [{ role, index, pid: process.pid }] : [];
    }),
    stopped: expected.filter(({ role, index }) => !find(role, index)),
  };
}

/** The topology in DATA_DIR as it is now; undefined when none was ever started there. */
export function status(config: Config): ClusterStatus | undefined {
  const state = readState(config);
  return state ? statusOf(state) : undefined;
}

/** Stops everything (replicas, UI, Temporal, PostgreSQL) and checks that no port is left bound. */
export async function down(config: Config, log: Log): Promise<void> {
  await withLock(config, async () => {
    const state = readState(config);
    if (!state) {
      log(`no cluster in ${config.dataDir}: nothing to stop`);
      return;
    }
    const stopAll = (roles: string[]) =>
      Promise.all(state.processes.filter((p) => roles.includes(p.role)).map((p) => stopProcess(p, stopGraceMs(p.role, state.workerDrainMs))));
    log('stopping the API and worker replicas…');
    await stopAll(['api', 'worker']);
    log('stopping the Web UI and the Temporal server…');
    await stopAll(['ui', 'temporal']);
    const pgBin = newestBinDir();
    if (pgBin) {
      log('stopping PostgreSQL…');
      await stopPostgres(state.layout, pgBin);
    }
    const left = state.processes.filter(isRunning);
    if (left.length > 0) throw new Error(`still running: ${left.map((p) => `${p.role} ${p.index} (pid ${p.pid})`).join(', ')}`);
    let bound: number[] = [];
    await waitUntil(
      async () => {
        const ports = boundPorts(state.layout).map(({ port }) => port);
        const free = await Promise.all(ports.map((port) => portIsFree(port)));
        bound = ports.filter((_, i) => !free[i]);
        return bound.length === 0;
      },
      15_000,
      () => `ports still bound after down: ${bound.join(', ')}`,
    );
    state.processes = [];
    writeState(state);
  });
}

