/**
 * The production topology of `npm run cluster`, driven as its users drive it (the npm script,
 * in a child process) in a temporary DATA_DIR on free ports: for the topology's tests, its
 * fault scenarios and the benchmark.
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClusterLayout } from '../../src/local/cluster/layout.ts';
import { ensurePostgresInstalled, startPostgres, stopPostgres } from '../../src/local/cluster/postgres.ts';
import { isRunning, processStartTime, sleep } from '../../src/local/cluster/processes.ts';
import type { ClusterStatus } from '../../src/local/cluster/topology.ts';
import { freePortBlock } from './ports.ts';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Ports of one topology: PORT.. (4 API replicas), TEMPORAL_PORT.. (10), UI, PostgreSQL, the metrics of 4 workers and 4 API replicas (2 × 8). */
const PORT_BLOCK = 32;

export type ClusterRole = 'postgres' | 'temporal' | 'ui' | 'api' | 'worker';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ClusterOptions {
  /** A short name, in the DATA_DIR's name. */
  name: string;
  /** More variables for `up` (they reach every replica), on top of the ports and DATA_DIR. */
  env?: NodeJS.ProcessEnv;
  /** Arguments of the first `up`, e.g. ['--workers', '1']. */
  upArgs?: string[];
  /** Parent folder of a fresh DATA_DIR [the OS temp dir]. */
  stateParent?: string;
  /** DATA_DIR itself, instead of a fresh folder in `stateParent`. */
  dataDir?: string;
  /** The checkout whose `npm run cluster` drives it (an earlier release's, for the upgrade test); this one by default. */
  root?: string;
}

/** A running production topology and the means to damage and repair it. */
export interface ClusterHandle {
  readonly dataDir: string;
  /** The environment `up` ran with. */
  readonly env: NodeJS.ProcessEnv;
  /** The status printed by the last up / status call. */
  readonly status: ClusterStatus;
  /** `npm run cluster -- <args>` with the topology's environment (and `env` on top). */
  cli(args: string[], env?: NodeJS.ProcessEnv): Promise<CommandResult>;
  /** `up --json` (again); throws when it fails. */
  up(args?: string[]): Promise<ClusterStatus>;
  /** `status --json`. */
  refresh(): Promise<ClusterStatus>;
  /** The pid of a running process of the topology (from the last status). */
  pid(role: ClusterRole, index?: number): number;
  /** SIGKILL; resolves once the process is gone. */
  kill(role: ClusterRole, index?: number): Promise<void>;
  /** `pg_ctl stop -m fast` of the topology's PostgreSQL, and its start again (as `up` starts it). */
  stopPostgres(): Promise<void>;
  startPostgres(): Promise<void>;
  /** The log of a process (`postgres`, `temporal`, `ui`, `bootstrap`, `api-0`, `worker-1`, ...). */
  log(name: string): string;
  /** `down`, then the DATA_DIR removed (kept with KEEP_CLUSTER_DIR=1). */
  destroy(): Promise<CommandResult>;
  /** From now on, `npm run cluster` of the checkout in `root` drives it (the working tree's, after an upgrade). */
  driveWith(root: string): void;
}

/** The environment of the child processes: the test's own, minus what belongs to the test runner or would redirect the cluster. */
function baseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'NODE_OPTIONS', 'DATABASE_URL', 'TEMPORAL_ADDRESS', 'TEMPORAL_TASK_QUEUE']) {
    delete env[name];
  }
  return env;
}

function runCluster(args: string[], env: NodeJS.ProcessEnv, root = REPO_ROOT): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'cluster', '--', ...args], { cwd: root, env, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

function parseStatus(result: CommandResult, what: string): ClusterStatus {
  try {
    return JSON.parse(result.stdout) as ClusterStatus;
  } catch {
    throw new Error(`${what} printed no status (exit ${result.code}):\n${result.stderr}\n${result.stdout}`);
  }
}

/** Starts a topology with `npm run cluster -- up` in a fresh DATA_DIR on free ports. */
export async function startClusterTopology(options: ClusterOptions): Promise<ClusterHandle> {
  const dataDir = options.dataDir ?? mkdtempSync(path.join(options.stateParent ?? os.tmpdir(), `webhooks-cluster-${options.name}-`));
  mkdirSync(dataDir, { recursive: true });
  // PostgreSQL runs as the OS user postgres when the tests run as root: it must traverse the folder.
  chmodSync(dataDir, 0o755);
  const base = await freePortBlock(PORT_BLOCK);
  const env: NodeJS.ProcessEnv = {
    ...baseEnv(),
    LOG_LEVEL: 'warn',
    ...options.env,
    DATA_DIR: dataDir,
    PORT: String(base),
    TEMPORAL_PORT: String(base + 4),
    TEMPORAL_UI_PORT: String(base + 14),
    CLUSTER_POSTGRES_PORT: String(base + 15),
    METRICS_PORT: String(base + 16),
    TEMPORAL_SDK_METRICS_PORT: String(base + 17),
  };
  let status: ClusterStatus | undefined;
  let root = options.root ?? REPO_ROOT;
  const layout = (): ClusterLayout => JSON.parse(readFileSync(path.join(dataDir, 'cluster', 'state.json'), 'utf8')).layout as ClusterLayout;
  const handle: ClusterHandle = {
    dataDir,
    env,
    get status() {
      if (!status) throw new Error('the cluster has not been started');
      return status;
    },
    cli: (args, extra = {}) => runCluster(args, { ...env, ...extra }, root),
    async up(args = []) {
      const result = await runCluster(['up', '--json', ...args], env, root);
      if (result.code !== 0) throw new Error(`npm run cluster -- up failed (${result.code}):\n${result.stderr}`);
      status = parseStatus(result, 'up');
      return status;
    },
    async refresh() {
      status = parseStatus(await runCluster(['status', '--json'], env, root), 'status');
      return status;
    },
    pid(role, index = 0) {
      const found = handle.status.processes.find((p) => p.role === role && p.index === index);
      if (!found) throw new Error(`${role} ${index} is not running`);
      return found.pid;
    },
    async kill(role, index = 0) {
      const pid = handle.pid(role, index);
      const startTime = processStartTime(pid) ?? 0;
      process.kill(pid, 'SIGKILL');
      while (isRunning({ pid, startTime })) await sleep(20);
    },
    async stopPostgres() {
      await stopPostgres(layout(), await ensurePostgresInstalled(() => {}));
    },
    async startPostgres() {
      const current = layout();
      await startPostgres(current, await ensurePostgresInstalled(() => {}), path.join(current.logDir, 'postgres.log'));
    },
    log(name) {
      const file = path.join(dataDir, 'cluster', 'logs', `${name}.log`);
      return existsSync(file) ? readFileSync(file, 'utf8') : '';
    },
    async destroy() {
      const result = await runCluster(['down'], env, root);
      if (!process.env.KEEP_CLUSTER_DIR) rmSync(dataDir, { recursive: true, force: true });
      return result;
    },
    driveWith(next) {
      root = next;
    },
  };
  try {
    await handle.up(options.upArgs);
  } catch (error) {
    await handle.destroy();
    throw error;
  }
  return handle;
}
