/**
 * The service as it runs in production, assembled from real processes for one fault
 * scenario: a PostgreSQL server of its own (Debian's binaries, temp dir, free port), a
 * Temporal dev server on a SQLite file, and the API and the worker as separate
 * `node --import ./scripts/typescript.mjs src/main.ts <role>` processes. Every part can be killed and started
 * again; nothing here is mocked.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import { openDatabase } from '../../src/db/client.ts';
import { startDevServer, type DevServer } from '../../src/local/dev-server.ts';
import { freePort } from '../support/ports.ts';
import { serviceNodeFlags } from '../support/service-command.ts';
import { newestBinDir } from '../../src/local/cluster/postgres.ts';
import { httpOk } from '../../src/local/cluster/processes.ts';
import { waitFor } from '../support/wait.ts';
import { createScenarioKeys, type Deployment } from './workload.ts';

const run = promisify(execFile);
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The newest PostgreSQL of Debian's packages (`/usr/lib/postgresql/<major>/bin`), unless FAULTS_PG_BIN says. */
const PG_BIN =
  process.env.FAULTS_PG_BIN ??
  newestBinDir() ??
  (() => {
    throw new Error("no PostgreSQL server under /usr/lib/postgresql: install Debian's postgresql package or set FAULTS_PG_BIN");
  })();
const asRoot = process.getuid?.() === 0;
/**
 * Where the scenario's state lives (Postgres data, the Temporal SQLite file, logs): tmpfs when
 * the machine has one, so the dev server's SQLite fsyncs do not make disk speed the bottleneck.
 * It survives everything the suite does (process kills), which is all that matters here.
 */
/**
 * The scenarios publish one project's events faster than the default publish quota (FAULTS_RATE
 * a second, bursts of hundreds): the quota is not what they test, so it is lifted.
 */
export const FAULT_SCENARIO_QUOTA = { PROJECT_PUBLISH_RATE: '100000', PROJECT_PUBLISH_BURST: '1000000' };

export const STATE_PARENT = process.env.FAULTS_TMPDIR ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/** A PostgreSQL server of this scenario only; stopping it disturbs nobody else. */
export interface PostgresServer {
  readonly url: string;
  readonly port: number;
  /** `pg_ctl stop -m fast`. */
  stop(): Promise<void>;
  /** `pg_ctl start`, waits until it accepts connections. */
  start(): Promise<void>;
  /** Stops it (immediate) and removes its files. */
  destroy(): Promise<void>;
}

/** Runs a PostgreSQL binary as the `postgres` OS user when this process is root (Postgres refuses root). */
async function pgRun(binary: string, args: string[]): Promise<void> {
  const file = path.join(PG_BIN, binary);
  const [command, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
  await run(command, argv, { timeout: 120_000 });
}

export async function startPostgres(root: string): Promise<PostgresServer> {
  const dir = path.join(root, 'pg');
  const dataDir = path.join(dir, 'data');
  const socketDir = path.join(dir, 'socket');
  await mkdir(socketDir, { recursive: true });
  if (asRoot) await run('chown', ['-R', 'postgres:postgres', dir]);
  await pgRun('initdb', ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '-N']);
  const port = await freePort();
  // Appending keeps the file's owner (postgres). fsync off: this server only ever sees
  // process-level faults, never an OS crash, so committed data survives them anyway.
  await appendFile(
    path.join(dataDir, 'postgresql.conf'),
    [
      '',
      `listen_addresses = '127.0.0.1'`,
      `port = ${port}`,
      `unix_socket_directories = '${socketDir}'`,
      'max_connections = 100',
      'fsync = off',
      'full_page_writes = off',
      '',
    ].join('\n'),
  );
  const logFile = path.join(dir, 'postgres.log');
  const start = () => pgRun('pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start']);
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop: () => pgRun('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', 'stop']),
    async destroy() {
      await pgRun('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Temporal dev server

/** The Temporal dev server on a SQLite file in `stateDir`, killable and restartable on that file. */
export interface TemporalServer {
  readonly address: string;
  /** SIGKILL, read from `<stateDir>/temporal.pid`; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and database file. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

export async function startTemporal(root: string): Promise<TemporalServer> {
  const stateDir = path.join(root, 'temporal');
  const port = await freePort();
  const options = {
    cliPath: process.env.TEMPORAL_CLI_PATH?.trim() || undefined,
    stateDir,
    port,
    uiPort: undefined,
    namespace: 'default',
  };
  let current: DevServer | undefined = await startDevServer(options);
  return {
    address: current.address,
    async kill() {
      const pid = Number(await readFile(path.join(stateDir, 'temporal.pid'), 'utf8'));
      process.kill(pid, 'SIGKILL');
      // The old handle must not be stopped later: its stop() would remove the next pid file.
      current = undefined;
      await waitFor('the killed Temporal dev server to exit', () => processGone(pid), { timeoutMs: 10_000, intervalMs: 50 });
    },
    async start() {
      current = await startDevServer(options);
    },
    async stop() {
      await current?.stop();
      current = undefined;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Service processes

type Role = 'api' | 'worker' | 'migrate';

/** How long a service process may take to be ready after it is spawned. */
const READY_WITHIN_MS = 120_000;

/** One `node <flags of npm start> src/main.ts <role>` process, restartable with the same environment. */
export class ServiceProcess {
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #starts = 0;
  /** Exits nobody asked for (a crash), with their code or signal. */
  readonly unexpectedExits: string[] = [];
  #expectExit = false;

  readonly role: Role;
  private readonly env: NodeJS.ProcessEnv;
  private readonly logDir: string;
  private readonly ready: () => Promise<boolean>;

  constructor(role: Role, env: NodeJS.ProcessEnv, logDir: string, ready: () => Promise<boolean>) {
    this.role = role;
    this.env = env;
    this.logDir = logDir;
    this.ready = ready;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Spawns the process and resolves once it is ready (`migrate`: once it exited with 0). */
  async start(): Promise<void> {
    this.#starts += 1;
    const logFile = path.join(this.logDir, `${this.role}.${this.#starts}.log`);
    const log = createWriteStream(logFile);
    const child = spawn(process.execPath, [...serviceNodeFlags(), 'src/main.ts', this.role], {
      cwd: REPO_ROOT,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    this.#child = child;
    this.#expectExit = this.role === 'migrate';
    this.#exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        if (!this.#expectExit) this.unexpectedExits.push(`${this.role} exited (${code ?? signal})`);
        resolve();
      }),
    );
    if (this.role === 'migrate') {
      await this.#exited;
      if (child.exitCode !== 0) throw new Error(`migrate failed (${child.exitCode}); see ${this.logDir}/migrate.1.log`);
      return;
    }
    try {
      // A start beside a scenario's load on a busy machine can take a while: a liveness bound.
      await waitFor(
        `the ${this.role} process to be ready`,
        async () => {
          if (!this.running) throw new Error(`the ${this.role} process exited during start-up`);
          return this.ready();
        },
        { timeoutMs: READY_WITHIN_MS },
      );
    } catch (error) {
      // The log is removed with the scenario's folder: its end goes with the failure.
      const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-40).join('\n');
      throw new Error(`${(error as Error).message}; the end of its log (${logFile}):\n${tail}`, { cause: error });
    }
  }

  /** SIGKILL, no chance to clean up; resolves once it is gone. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.#expectExit = true;
    this.#child!.kill('SIGKILL');
    await this.#exited;
  }

  /** SIGTERM (graceful), SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (!this.running) return;
    this.#expectExit = true;
    const child = this.#child!;
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.kill('SIGTERM');
    await this.#exited;
    clearTimeout(force);
  }
}


// ---------------------------------------------------------------------------------------------
// The cluster

export interface Cluster extends Deployment {
  readonly root: string;
  readonly postgres: PostgresServer;
  readonly temporal: TemporalServer;
  readonly api: ServiceProcess;
  readonly worker: ServiceProcess;
  readonly apiUrl: string;
  /** The worker's /metrics (its own and the Temporal SDK's). */
  readonly workerMetricsUrl: string;
  /** Process exits nobody asked for, across restarts. */
  unexpectedExits(): string[];
  /** Everything a role's processes logged so far (LOG_LEVEL=warn), across restarts. */
  logs(role: 'api' | 'worker'): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts Postgres, the Temporal dev server, runs `migrate`, then the API and the worker as
 * separate processes with the production configuration (DATABASE_URL, TEMPORAL_ADDRESS).
 * `caFile` is the receiver's certificate (DELIVERY_CA_FILE); `extraEnv` goes to every process.
 */
export async function startCluster(name: string, caFile: string, extraEnv: Record<string, string> = {}): Promise<Cluster> {
  const root = await mkdtemp(path.join(STATE_PARENT, `webhooks-faults-${name}-`));
  if (asRoot) await run('chmod', ['755', root]);
  const logDir = path.join(root, 'logs');
  await mkdir(logDir, { recursive: true });
  const stops: (() => Promise<unknown>)[] = [];
  try {
    const [postgres, temporal] = await Promise.all([startPostgres(root), startTemporal(root)]);
    stops.push(() => postgres.destroy(), () => temporal.stop());

    const [apiPort, apiMetricsPort, apiSdkPort, workerMetricsPort, workerSdkPort] = await Promise.all(
      Array.from({ length: 5 }, () => freePort()),
    );
    const bundle = inject('faultsWorkflowBundlePath');
    const common: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'production',
      DATABASE_URL: postgres.url,
      DATABASE_POOL_MAX: '10',
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: `faults-${name}-${randomUUID()}`,
      SECRET_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
      DELIVERY_CA_FILE: caFile,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      DATA_DIR: path.join(root, 'data'),
      WORKFLOW_BUNDLE_PATH: bundle && existsSync(bundle) ? bundle : path.join(root, 'no-bundle.js'),
      ...FAULT_SCENARIO_QUOTA,
      ...extraEnv,
    };
    delete common.VITEST;
    delete common.VITEST_POOL_ID;
    delete common.VITEST_WORKER_ID;
    delete common.NODE_OPTIONS;

    await new ServiceProcess('migrate', common, logDir, async () => true).start();
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    const api = new ServiceProcess(
      'api',
      { ...common, PORT: String(apiPort), METRICS_PORT: String(apiMetricsPort), TEMPORAL_SDK_METRICS_PORT: String(apiSdkPort) },
      logDir,
      () => httpOk(`${apiUrl}/readyz`),
    );
    const worker = new ServiceProcess(
      'worker',
      {
        ...common,
        PORT: String(apiPort),
        METRICS_PORT: String(workerMetricsPort),
        TEMPORAL_SDK_METRICS_PORT: String(workerSdkPort),
      },
      logDir,
      () => httpOk(`http://127.0.0.1:${workerMetricsPort}/metrics`),
    );
    // At the end of a scenario nothing is left to drain: a short grace keeps the suite fast.
    stops.push(() => api.stop(3_000), () => worker.stop(3_000));
    await Promise.all([api.start(), worker.start()]);

    const database = await openDatabase({ kind: 'postgres', url: postgres.url, poolMax: 4 });
    stops.push(() => database.close());

    return {
      root,
      postgres,
      temporal,
      api,
      worker,
      apiUrl,
      apiUrls: [apiUrl],
      workerMetricsUrl: `http://127.0.0.1:${workerMetricsPort}/metrics`,
      db: database.db,
      createKey: () => createScenarioKeys(database.db, `prj_${name}_${randomUUID().slice(0, 8)}`),
      unexpectedExits: () => [...api.unexpectedExits, ...worker.unexpectedExits],
      async logs(role) {
        const files = (await readdir(logDir)).filter((file) => file.startsWith(`${role}.`)).sort();
        return (await Promise.all(files.map((file) => readFile(path.join(logDir, file), 'utf8')))).join('');
      },
      async stop() {
        for (const stop of stops.reverse()) await stop().catch(() => {});
        if (!process.env.FAULTS_KEEP_DIR) await rm(root, { recursive: true, force: true });
      },
    };
  } catch (error) {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    throw new Error(`could not start the ${name} cluster (files in ${root}): ${String(error)}`, { cause: error });
  }
}
