/**
 * What a system run measures: the service and its backends, started by the bench so that each
 * process's CPU and memory are its own. Two kinds:
 *
 * - {@link serviceTarget}: the service as one process (`node <flags of npm start> src/main.ts`),
 *   on the embedded stack, or on DATABASE_URL / TEMPORAL_ADDRESS, or on comparison backends the
 *   bench starts (`--postgres`, `--own-temporal`);
 * - {@link clusterTarget}: the production topology of `npm run cluster` (`--cluster`).
 *
 * A target is planned first (its process groups, for the sampler that must run from the first
 * moment of start-up) and then started.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { TEMPORAL_MODULES } from '../../src/local/temporal-tools.mjs';
import type { ClusterLayout } from '../../src/local/cluster/layout.ts';
import { startClusterTopology } from '../../test/support/cluster.ts';
import { readStatementStats, resetStatementStats, startOwnPostgres, startOwnTemporal, type OwnBackend, type StatementStats } from './backends.ts';
import { killOnExit, onCleanup, workDir } from './lifecycle.ts';
import { options } from './options.ts';
import { processTree, type ProcessGroup, type ProcStat } from './procstat.ts';
import { dataDirOf, embeddedPids, REPO_ROOT, startStack } from './stack.ts';
import { metricsUrlFromLog } from './temporal-metrics.ts';

/** A started deployment of the service. */
export interface SystemTarget {
  readonly mode: string;
  /** The API replicas; the publisher spreads its calls over them. */
  readonly apiUrls: readonly string[];
  readonly databaseUrl: string;
  readonly temporalMetricsUrl: string | undefined;
  /** The one service process (API and worker), when there is one: its threads and its probe are read. */
  readonly serviceProcess: { pid: number; probeFile: string } | undefined;
  /** The database process of the embedded stack, to name its profile. */
  readonly databasePid: number | undefined;
  readonly startupMs: number;
  readonly setup: Record<string, unknown>;
  /** pg_stat_statements around the load, where the bench owns the PostgreSQL. */
  readonly statements?: { reset(): Promise<void>; read(): Promise<StatementStats> };
  /** Stops the service (first) and its backends; resolves with the service's exit. */
  stop(): Promise<unknown>;
}

export interface TargetPlan {
  /** The target's process groups (sampled from before its start). */
  readonly groups: ProcessGroup[];
  start(): Promise<SystemTarget>;
}

interface PlanInputs {
  caFile: string;
  /** Extra node flags of the service process (--cpu-prof). */
  nodeArgs: string[];
  /** More environment of the service's processes (--tracing's, a scenario's); --env's win over it. */
  env?: Record<string, string>;
  /**
   * Keep the service's publish quota per project: only the run about it (the publish flood)
   * does. The others measure the service at the rates they ask for, so no project is held back.
   */
  keepPublishQuota?: boolean;
}

/** The environment that lifts the publish quota of every project, for runs that are not about it. */
const NO_PUBLISH_QUOTA = { PROJECT_PUBLISH_RATE: '100000', PROJECT_PUBLISH_BURST: '1000000' };

/** The service as one process, on the embedded stack or the backends of the options and the environment. */
export function serviceTarget({ caFile, nodeArgs, env = {}, keepPublishQuota = false }: PlanInputs): TargetPlan {
  let servicePid = 0;
  let ownPostgres: OwnBackend | undefined;
  let ownTemporal: OwnBackend | undefined;
  const embedded = embeddedPids(dataDirOf(workDir));
  const databaseUrl = () => ownPostgres?.url ?? process.env['DATABASE_URL'];
  const temporalAddress = () => ownTemporal?.url ?? process.env['TEMPORAL_ADDRESS'];
  const temporalTree = (all: ProcStat[]) => {
    const pid = ownTemporal?.pid ?? embedded.temporalPid();
    return pid ? processTree(pid, all) : [];
  };
  const embeddedDatabaseTree = (all: ProcStat[]) => {
    const pid = embedded.databasePid();
    return pid ? processTree(pid, all) : [];
  };
  const groups: ProcessGroup[] = [
    // The service's own process: the API and the worker (the budget of the RSS target).
    { name: 'service', pids: () => (servicePid ? [servicePid] : []) },
    {
      name: 'helpers',
      // Short-lived children of the service (the workflow bundler at start), not the Temporal
      // server and not the embedded database's process.
      pids: (all) => {
        if (!servicePid) return [];
        const others = new Set([servicePid, ...temporalTree(all), ...embeddedDatabaseTree(all)]);
        return processTree(servicePid, all).filter((pid) => !others.has(pid));
      },
    },
    {
      name: 'temporal',
      pids: (all) => {
        const tree = temporalTree(all);
        if (tree.length > 0 || !temporalAddress()) return tree;
        // An external Temporal server on this machine, if there is one.
        return all.filter((p) => /^temporal/.test(p.comm)).map((p) => p.pid);
      },
    },
    options.postgres
      ? { name: 'postgres', pids: (all) => (ownPostgres ? processTree(ownPostgres.pid, all) : []) }
      : databaseUrl()
        ? // Every local postgres process (server and backends); other databases' load counts too.
          { name: 'postgres', pids: (all) => all.filter((p) => p.comm === 'postgres' || p.comm.startsWith('postgres:')).map((p) => p.pid) }
        : { name: 'pglite', pids: embeddedDatabaseTree },
  ];

  return {
    groups,
    async start() {
      let bundlePath: string | undefined;
      if (options.prebuiltBundle) {
        bundlePath = path.join(workDir, 'workflow-bundle.js');
        process.stderr.write('building the workflow bundle (npm run build:workflows into the temp dir)...\n');
        const env: NodeJS.ProcessEnv = { ...process.env, WORKFLOW_BUNDLE_PATH: bundlePath };
        if (env['NODE_OPTIONS']?.includes('tsx')) delete env['NODE_OPTIONS'];
        execFileSync(process.execPath, ['--import', 'tsx', 'src/temporal/bundle-workflows.ts'], { cwd: REPO_ROOT, env, stdio: 'inherit' });
      }
      if (options.postgres) {
        process.stderr.write('starting a throwaway PostgreSQL...\n');
        const backend = await startOwnPostgres(workDir, options.pgSettings);
        ownPostgres = backend;
        killOnExit(backend.pid);
        onCleanup(() => backend.stop());
      }
      if (options.ownTemporal) {
        process.stderr.write(`starting a Temporal dev server${options.temporalArgs.length ? ` with ${options.temporalArgs.join(' ')}` : ''}...\n`);
        const backend = await startOwnTemporal(workDir, options.temporalArgs);
        ownTemporal = backend;
        // In the bench's own process group (as the service runs it): a Ctrl-C reaches it too.
        onCleanup(() => backend.stop());
      }
      const stackOptions = {
        workDir,
        caFile,
        trust: options.trust,
        env: { ...(keepPublishQuota ? {} : NO_PUBLISH_QUOTA), ...env, ...options.extraEnv },
        databaseUrl: databaseUrl(),
        temporalAddress: temporalAddress(),
        workflowBundlePath: bundlePath,
      };
      if (options.warmDataDir) {
        // A first start (not measured) initialises DATA_DIR, so the measured one is like a second
        // `npm start`: no initdb of the embedded database, no first-time Temporal schema.
        process.stderr.write('initialising DATA_DIR with a first start (not measured)...\n');
        const first = await startStack({ ...stackOptions, nodeArgs: [], onSpawn: killOnExit });
        await first.stop();
      }
      process.stderr.write(`starting the service (${databaseUrl() || temporalAddress() ? 'external' : 'embedded'} mode)...\n`);
      const stack = await startStack({
        ...stackOptions,
        nodeArgs,
        onSpawn: (pid) => {
          servicePid = pid;
          killOnExit(pid);
        },
      });
      let stopped: Promise<unknown> | undefined;
      const stop = () => (stopped ??= stack.stop());
      onCleanup(stop);
      process.stderr.write(`service ready in ${(stack.startupMs / 1000).toFixed(1)} s (pid ${stack.pid}, temporal pid ${embedded.temporalPid() ?? '-'})\n`);
      const statementsUrl = ownPostgres?.url;
      return {
        mode: stack.mode,
        apiUrls: [stack.apiUrl],
        databaseUrl: stack.databaseUrl,
        temporalMetricsUrl: ownTemporal?.metricsUrl ?? metricsUrlFromLog(path.join(stack.dataDir, 'temporal', 'temporal.log')),
        serviceProcess: { pid: stack.pid, probeFile: stack.probeFile },
        databasePid: embedded.databasePid(),
        startupMs: stack.startupMs,
        setup: {
          database: ownPostgres?.description ?? (databaseUrl() ? 'PostgreSQL at DATABASE_URL' : 'PGlite in its own process, spawned by the service (embedded)'),
          temporal: ownTemporal?.description ?? (temporalAddress() ? 'Temporal at TEMPORAL_ADDRESS' : 'Temporal dev server spawned by the service (embedded)'),
          data_dir_initialised_before: options.warmDataDir,
        },
        ...(statementsUrl ? { statements: { reset: () => resetStatementStats(statementsUrl), read: () => readStatementStats(statementsUrl) } } : {}),
        stop,
      };
    },
  };
}

/**
 * The production topology (`npm run cluster -- up --workers N --history-shards S` in the temporary
 * DATA_DIR): PostgreSQL, the Temporal server, the Web UI, the API and worker replicas, each a
 * process group of its own.
 */
export function clusterTarget({ caFile, env = {}, keepPublishQuota = false }: PlanInputs, cluster: { workers: number; historyShards: number }): TargetPlan {
  const dataDir = dataDirOf(workDir);
  const stateFile = path.join(dataDir, 'cluster', 'state.json');
  // Read at each sample: the replicas appear in the state file as `up` starts them.
  const recorded = (role: string): number[] => {
    try {
      const state = JSON.parse(readFileSync(stateFile, 'utf8')) as { processes: { role: string; pid: number }[] };
      return state.processes.filter((p) => p.role === role).map((p) => p.pid);
    } catch {
      return [];
    }
  };
  const postmaster = (): number | undefined => {
    try {
      const layout = (JSON.parse(readFileSync(stateFile, 'utf8')) as { layout: ClusterLayout }).layout;
      const pidFile = path.join(layout.postgres.dataDir, 'postmaster.pid');
      return existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined;
    } catch {
      return undefined;
    }
  };
  const groups: ProcessGroup[] = [
    { name: 'api', pids: () => recorded('api') },
    { name: 'worker', pids: (all) => recorded('worker').flatMap((pid) => processTree(pid, all)) },
    { name: 'temporal', pids: () => recorded('temporal') },
    { name: 'ui', pids: () => recorded('ui') },
    {
      name: 'postgres',
      pids: (all) => {
        const pid = postmaster();
        return pid ? processTree(pid, all) : [];
      },
    },
  ];
  return {
    groups,
    async start() {
      process.stderr.write(`starting the production topology (npm run cluster -- up, ${cluster.workers} worker replica(s), ${cluster.historyShards} history shards)...\n`);
      const started = performance.now();
      // PostgreSQL runs as the OS user postgres when the bench runs as root: it must traverse the work folder.
      chmodSync(workDir, 0o755);
      const topology = await startClusterTopology({
        name: 'bench',
        dataDir,
        upArgs: ['--workers', String(cluster.workers), '--history-shards', String(cluster.historyShards)],
        env: {
          LOG_LEVEL: process.env['BENCH_SERVICE_LOG_LEVEL'] ?? 'warn',
          DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
          ...(options.trust === 'ca-file' ? { DELIVERY_CA_FILE: caFile } : { NODE_EXTRA_CA_CERTS: caFile }),
          ...(keepPublishQuota ? {} : NO_PUBLISH_QUOTA),
          ...env,
          ...options.extraEnv,
        },
      });
      const startupMs = Math.round(performance.now() - started);
      // `down` only: the DATA_DIR goes with the work folder (kept with --keep).
      let stopped: Promise<unknown> | undefined;
      const stop = () => (stopped ??= topology.cli(['down']));
      onCleanup(stop);
      const { status } = topology;
      process.stderr.write(`cluster ready in ${(startupMs / 1000).toFixed(1)} s: ${status.processes.map((p) => `${p.role} ${p.pid}`).join(', ')}\n`);
      return {
        mode: 'cluster',
        apiUrls: status.api,
        databaseUrl: status.postgres,
        temporalMetricsUrl: status.temporalMetrics,
        serviceProcess: undefined,
        databasePid: undefined,
        startupMs,
        setup: {
          database: 'PostgreSQL of npm run cluster (Debian\'s, deploy/postgres/production.conf), shared with Temporal',
          temporal: `Temporal server ${TEMPORAL_MODULES.server.version} of npm run cluster on that PostgreSQL, ${status.historyShards} history shards`,
          topology: { api_replicas: status.api.length, worker_replicas: cluster.workers, history_shards: status.historyShards },
        },
        stop,
      };
    },
  };
}
