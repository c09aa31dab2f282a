import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freePort } from './ports.ts';
import { serviceNodeFlags } from './service-command.ts';
import { deadlineIn } from './wait.ts';

/*
 * The service as a user runs it (`npm start` in a terminal), for the tests that start it for
 * real: its ports, its environment, and its process group.
 */

const projectRoot = path.resolve(import.meta.dirname, '../..');
const READY_TIMEOUT_MS = 90_000;
const EXIT_TIMEOUT_MS = 30_000;

/** The ports the embedded service binds, moved off their defaults. */
export interface Ports {
  api: number;
  temporal: number;
  ui: number;
  pglite: number;
  metrics: number;
  sdkMetrics: number;
}

/** Ports free on 127.0.0.1 right now, one per listener of the embedded service. */
export async function freePorts(): Promise<Ports> {
  return {
    api: await freePort(),
    temporal: await freePort(),
    ui: await freePort(),
    pglite: await freePort(),
    metrics: await freePort(),
    sdkMetrics: await freePort(),
  };
}

/** The environment a user has for `npm start`: embedded defaults, only the ports (and `DATA_DIR` when given) moved. */
export function embeddedEnv(dataDir: string | undefined, ports: Ports): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...(dataDir ? { DATA_DIR: dataDir } : {}),
    PORT: String(ports.api),
    TEMPORAL_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    PGLITE_PORT: String(ports.pglite),
    TEMPORAL_SDK_METRICS_PORT: String(ports.sdkMetrics),
    METRICS_PORT: String(ports.metrics),
    LOG_LEVEL: 'info',
  };
  if (!dataDir) delete env.DATA_DIR;
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'SECRET_ENCRYPTION_KEY', 'EVENT_PRODUCER_TOKEN', 'WEBHOOKS_API_URL', 'WEBHOOKS_API_TOKEN']) {
    delete env[name];
  }
  return env;
}

/** A process started as its own group, with everything it printed. */
export interface GroupProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: GroupProcess[] = [];

/** Starts a command as its own process group, as a terminal runs it; {@link killStarted} ends it. */
export function startGroup(command: string, args: string[], env: NodeJS.ProcessEnv, cwd = projectRoot): GroupProcess {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const group = { child, output: () => output, exited };
  started.push(group);
  return group;
}

/** `src/main.ts [role]` with the flags of `npm start`, as its own process group. */
export function startService(env: NodeJS.ProcessEnv, args: string[] = []): GroupProcess {
  return startGroup(process.execPath, [...serviceNodeFlags(), 'src/main.ts', ...args], env);
}

/** SIGKILLs every group started and not yet killed: a failed test must leave nothing behind. */
export function killStarted(): void {
  for (const group of started.splice(0)) {
    try {
      process.kill(-group.child.pid!, 'SIGKILL');
    } catch {
      // the group is gone: nothing was left
    }
  }
}

/** The last lines of a process's output, for failure messages. */
export function lastLines(text: string, count = 30): string {
  return text.trimEnd().split('\n').slice(-count).join('\n');
}

/** Waits until the service's `/readyz` on `port` answers 200; fails if it exits first. */
export async function waitForReady(service: GroupProcess, port: number): Promise<void> {
  const deadline = deadlineIn(READY_TIMEOUT_MS);
  let exited = false;
  void service.exited.then(() => (exited = true));
  let last = '';
  while (!deadline.passed() && !exited) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(5_000) });
      if (response.status === 200) return;
      last = `${response.status} ${await response.text()}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`the service did not become ready (${exited ? 'it exited' : last}):\n${lastLines(service.output())}`);
}

/** How the process ended, failing after `timeoutMs` (30 s). */
export async function waitForExit(service: GroupProcess, timeoutMs = EXIT_TIMEOUT_MS): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the process did not exit within ${timeoutMs / 1000} s:\n${lastLines(service.output())}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([service.exited, limit]);
  } finally {
    clearTimeout(timer);
  }
}
