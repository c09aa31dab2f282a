/**
 * Long-lived processes of the local production topology: started detached (they outlive the
 * `npm run cluster -- up` that started them), known by pid and start time (so a recycled pid is
 * never mistaken for them), stopped by signal.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

/** A process of the topology as the state file records it. */
export interface ProcessRecord {
  role: string;
  index: number;
  /** The process itself (for `api` and `worker`: the node process of the service). */
  pid: number;
  /** Its start time in clock ticks since boot (/proc/<pid>/stat field 22). */
  startTime: number;
  /** Process group to signal on stop (the `npm run` wrapper's group), when there is one. */
  group?: number;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Fields of /proc/<pid>/stat after the command name, or undefined when there is no such process. */
function statFields(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** When process `pid` started (clock ticks since boot), undefined if there is none. */
export function processStartTime(pid: number): number | undefined {
  const fields = statFields(pid);
  return fields ? Number(fields[19]) : undefined;
}

/** True while the recorded process runs: same pid, same start time, not a zombie. */
export function isRunning(record: Pick<ProcessRecord, 'pid' | 'startTime'>): boolean {
  const fields = statFields(record.pid);
  return fields !== undefined && fields[0] !== 'Z' && Number(fields[19]) === record.startTime;
}

/** The direct children of `pid`. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The file name of the program process `pid` runs. Not its `comm`: Node 26 names its
 * main thread `node-MainThread` there.
 */
function programName(pid: number): string {
  try {
    return path.basename(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return '';
  }
}

/**
 * Starts `command` in a session of its own with stdout and stderr appended to `logFile`, and
 * returns its record. It keeps running after this process exits.
 */
export function spawnDetached(
  role: string,
  index: number,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; logFile: string },
): ProcessRecord {
  const log = openSync(options.logFile, 'a');
  try {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', log, log] });
    child.unref();
    if (!child.pid) throw new Error(`cannot start ${command}`);
    return { role, index, pid: child.pid, startTime: processStartTime(child.pid) ?? 0, group: child.pid };
  } finally {
    closeSync(log);
  }
}

/**
 * The record of the process that `npm run <script>` runs: npm's child (the script execs node,
 * so the shell is replaced by it). Waits until npm has started it.
 */
export async function npmScriptProcess(wrapper: ProcessRecord, timeoutMs = 15_000): Promise<ProcessRecord> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (!isRunning(wrapper)) throw new Error(`npm run for ${wrapper.role} exited before it started the service`);
    const child = childrenOf(wrapper.pid).find((pid) => programName(pid) === 'node');
    const startTime = child === undefined ? undefined : processStartTime(child);
    if (child !== undefined && startTime !== undefined) return { ...wrapper, pid: child, startTime };
    await sleep(50);
  }
  throw new Error(`npm run for ${wrapper.role} did not start the service within ${timeoutMs / 1000} s`);
}

function signal(target: number, name: NodeJS.Signals): void {
  try {
    process.kill(target, name);
  } catch {
    // gone already
  }
}

/**
 * Stops a recorded process: SIGTERM (to its group when it has one), then SIGKILL after
 * `graceMs`. Resolves once it has exited.
 */
export async function stopProcess(record: ProcessRecord, graceMs: number): Promise<void> {
  if (!isRunning(record)) return;
  const targets = record.group ? [record.pid, -record.group] : [record.pid];
  for (const target of targets) signal(target, 'SIGTERM');
  const deadline = performance.now() + graceMs;
  while (isRunning(record) && performance.now() < deadline) await sleep(100);
  if (isRunning(record)) {
    for (const target of targets) signal(target, 'SIGKILL');
    while (isRunning(record)) await sleep(50);
  } else if (record.group) {
    // The npm wrapper exits with its child; anything else left in the group goes too.
    signal(-record.group, 'SIGKILL');
  }
}

/** True when nothing listens on `host:port`. */
export function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, host, () => probe.close(() => resolve(true)));
  });
}

/** Polls `probe` until it returns true; throws `message()` after `timeoutMs`. */
export async function waitUntil(
  probe: () => Promise<boolean> | boolean,
  timeoutMs: number,
  message: () => string,
  intervalMs = 250,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (performance.now() > deadline) throw new Error(message());
    await sleep(intervalMs);
  }
}

/** Runs `command` to completion with its output appended to `logFile`; rejects on a non-zero exit. */
export function runLogged(
  command: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; logFile: string; timeoutMs: number },
): Promise<void> {
  const log = openSync(options.logFile, 'a');
  return new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { env: options.env, stdio: ['ignore', log, log], timeout: options.timeoutMs });
    child.once('error', reject);
    child.once('exit', (code, signalName) =>
      code === 0
        ? resolve()
        : reject(new Error(`${path.basename(command)} ${args.join(' ')} failed (${code ?? signalName}); see ${options.logFile}:\n${tail(options.logFile)}`)),
    );
  }).finally(() => closeSync(log));
}

/** The last lines of a log file, for error messages. */
export function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** True when `url` answers 200. */
export async function httpOk(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

/** Waits until `url` answers 200; fails at once if the process exits. */
export function waitForHttp(what: string, url: string, record: ProcessRecord, logFile: string, timeoutMs: number): Promise<void> {
  return waitUntil(
    async () => {
      if (!isRunning(record)) throw new Error(`${what} exited during start-up; see ${logFile}:\n${tail(logFile)}`);
      return httpOk(url);
    },
    timeoutMs,
    () => `${what} did not answer on ${url} within ${timeoutMs / 1000} s; see ${logFile}:\n${tail(logFile)}`,
  );
}
