/**
 * The service under test, started as a child process (`node <flags of npm start> src/main.ts`) so that
 * its CPU and memory are its own, in a temporary DATA_DIR on free ports. With DATABASE_URL
 * and/or TEMPORAL_ADDRESS in the bench's environment they are passed through instead of the
 * embedded database / dev server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EMBEDDED_LOCK_FILE } from '../../src/local/embedded-database.ts';
import { freePort } from '../../test/support/ports.ts';
import { serviceNodeFlags } from '../../test/support/service-command.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export { freePort };

export type Trust = 'ca-file' | 'node-extra-ca';

export type StackMode = 'embedded' | 'external' | 'external-db' | 'external-temporal';

export interface StackOptions {
  workDir: string;
  caFile: string;
  /** Extra node flags for the service (for example --cpu-prof). */
  nodeArgs: string[];
  /** Extra environment for the service (for example DATABASE_POOL_MAX). */
  env: Record<string, string>;
  /** A prebuilt workflow bundle to use (WORKFLOW_BUNDLE_PATH); else the default path. */
  workflowBundlePath?: string | undefined;
  /**
   * How the service trusts the receiver's self-signed certificate: `ca-file` sets
   * DELIVERY_CA_FILE (the sender's agent gets a `ca` option), `node-extra-ca` sets
   * NODE_EXTRA_CA_CERTS (no `ca` option: the code path of a public endpoint in production).
   */
  trust: Trust;
  /** DATABASE_URL for the service (default: the bench's own environment's). */
  databaseUrl?: string | undefined;
  /** TEMPORAL_ADDRESS for the service (default: the bench's own environment's). */
  temporalAddress?: string | undefined;
  /** Called as soon as the service process exists (to start sampling it). */
  onSpawn?: (pid: number) => void;
}

export interface Stack {
  readonly mode: StackMode;
  readonly pid: number;
  readonly apiUrl: string;
  readonly dataDir: string;
  readonly databaseUrl: string;
  readonly logFile: string;
  /** JSON lines of bench/lib/service-probe.mjs: memory by kind and event-loop load, every second. */
  readonly probeFile: string;
  readonly startupMs: number;
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function waitReady(url: string, child: ChildProcess, logFile: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the service exited (${child.exitCode ?? child.signalCode}) during start-up; see ${logFile}:\n${tail(logFile)}`);
    }
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the service was not ready within ${timeoutMs / 1000} s; see ${logFile}:\n${tail(logFile)}`);
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}

/** The DATA_DIR the service under test gets in `workDir`. */
export const dataDirOf = (workDir: string) => path.join(workDir, 'data');

/** The pid a state file starts with (the dev server's pid file, the database's lock), if it exists. */
function pidIn(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim().split(' ')[0]);
  return pid > 0 ? pid : undefined;
}

/** Pids of the processes the embedded service spawns, read from its DATA_DIR (known from the first moments of start-up). */
export function embeddedPids(dataDir: string) {
  return {
    temporalPid: () => pidIn(path.join(dataDir, 'temporal', 'temporal.pid')),
    databasePid: () => pidIn(path.join(dataDir, 'pglite', EMBEDDED_LOCK_FILE)),
  };
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const dataDir = dataDirOf(options.workDir);
  const logFile = path.join(options.workDir, 'service.log');
  const [port, temporalPort, uiPort, pglitePort, metricsPort, sdkMetricsPort] = await Promise.all(
    Array.from({ length: 6 }, () => freePort()),
  );
  const databaseUrl = options.databaseUrl ?? process.env['DATABASE_URL'] ?? '';
  const temporalAddress = options.temporalAddress ?? process.env['TEMPORAL_ADDRESS'] ?? '';
  const externalDb = Boolean(databaseUrl);
  const externalTemporal = Boolean(temporalAddress);
  const mode: StackMode =
    externalDb && externalTemporal ? 'external' : externalDb ? 'external-db' : externalTemporal ? 'external-temporal' : 'embedded';
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    TEMPORAL_PORT: String(temporalPort),
    TEMPORAL_UI_PORT: String(uiPort),
    PGLITE_PORT: String(pglitePort),
    METRICS_PORT: String(metricsPort),
    TEMPORAL_SDK_METRICS_PORT: String(sdkMetricsPort),
    LOG_LEVEL: process.env['BENCH_SERVICE_LOG_LEVEL'] ?? 'warn',
    DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
    ...(options.trust === 'ca-file' ? { DELIVERY_CA_FILE: options.caFile } : { NODE_EXTRA_CA_CERTS: options.caFile }),
    ...(externalDb ? { DATABASE_URL: databaseUrl } : {}),
    ...(externalTemporal ? { TEMPORAL_ADDRESS: temporalAddress } : {}),
    ...(externalDb ? { SECRET_ENCRYPTION_KEY: process.env['SECRET_ENCRYPTION_KEY'] || randomBytes(32).toString('base64') } : {}),
    // A task queue of its own, so a shared Temporal cluster's other workers never take these tasks.
    ...(externalTemporal ? { TEMPORAL_TASK_QUEUE: process.env['TEMPORAL_TASK_QUEUE'] || `bench-${randomBytes(4).toString('hex')}` } : {}),
    ...(options.workflowBundlePath ? { WORKFLOW_BUNDLE_PATH: options.workflowBundlePath } : {}),
    ...options.env,
  };
  if (options.trust === 'node-extra-ca') delete env['DELIVERY_CA_FILE'];
  // A tsx loader in NODE_OPTIONS (from the bench's own launcher) is not the service's business.
  if (env['NODE_OPTIONS']?.includes('tsx')) delete env['NODE_OPTIONS'];

  const started = performance.now();
  const log = createWriteStream(logFile);
  const probeFile = path.join(options.workDir, 'probe.jsonl');
  rmSync(probeFile, { force: true });
  env['BENCH_PROBE_FILE'] = probeFile;
  const probe = fileURLToPath(new URL('./service-probe.mjs', import.meta.url));
  const child = spawn(process.execPath, [...options.nodeArgs, ...serviceNodeFlags(), '--import', probe, 'src/main.ts'], {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: Ctrl-C reaches the bench only, which stops the service in order,
    // and the whole group (the Temporal dev server included) can be killed as a last resort.
    detached: true,
  });
  if (child.pid) options.onSpawn?.(child.pid);
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  const apiUrl = `http://127.0.0.1:${port}`;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      // The worker drains running activities for up to 35 s, the dev server gets 10 s.
      const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 60_000);
      const result = await exited;
      clearTimeout(timer);
      killGroup(child.pid, 'SIGKILL'); // anything left in the group
      return result;
    }
    killGroup(child.pid, 'SIGKILL');
    return exited;
  };

  try {
    await waitReady(apiUrl, child, logFile, 300_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    mode,
    pid: child.pid!,
    apiUrl,
    dataDir,
    databaseUrl: externalDb ? databaseUrl : `postgres://postgres@127.0.0.1:${pglitePort}/postgres`,
    logFile,
    probeFile,
    startupMs: Math.round(performance.now() - started),
    stop,
  };
}

/** Sends a signal to a whole process group, ignoring a group that is gone. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // gone
  }
}
