import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { findTemporalCli } from './temporal-tools.mjs';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';
import { SERVICE_DYNAMIC_CONFIG } from './dynamic-config.ts';

/** A running Temporal dev server. */
export interface DevServer {
  readonly address: string;
  /** Web UI address, when the UI is on. */
  readonly uiUrl: string | undefined;
  stop(): Promise<void>;
}

export interface DevServerOptions {
  /** TEMPORAL_CLI_PATH, if set. */
  cliPath: string | undefined;
  /** Folder for the SQLite file, the log and the pid file; in memory when undefined. */
  stateDir: string | undefined;
  ip?: string;
  port: number;
  /** Web UI port; the UI is off when undefined. */
  uiPort: number | undefined;
  namespace: string;
  /** More `temporal server start-dev` arguments, after the service's own (a repeated setting takes the later value). */
  extraArgs?: string[];
}

const READY_TIMEOUT_MS = 60_000;

/**
 * Server settings beyond the CLI's defaults: the dynamic config the service relies on, and for
 * a state file SQLite's write-ahead log with `synchronous=NORMAL`: commits survive any process
 * crash (only a power loss can drop the last ones, never corrupt the file),
 * and the dev server completes about twice as many delivery workflows per second as with its
 * default rollback journal (docs/performance.md). Then the caller's `extraArgs`.
 */
function tuningArgs(options: DevServerOptions): string[] {
  return [
    ...Object.entries(SERVICE_DYNAMIC_CONFIG).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${JSON.stringify(value)}`]),
    ...(options.stateDir ? ['--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal'] : []),
    ...(options.extraArgs ?? []),
  ];
}

function devServerArgs(options: DevServerOptions): string[] {
  const args = [
    'server', 'start-dev',
    '--ip', options.ip ?? '127.0.0.1',
    '--port', String(options.port),
    '--namespace', options.namespace,
    '--log-level', 'warn',
    ...tuningArgs(options),
  ];
  for (const key of SEARCH_ATTRIBUTES) args.push('--search-attribute', `${key.name}=Keyword`);
  if (options.stateDir) args.push('--db-filename', path.join(options.stateDir, 'temporal.db'));
  if (options.uiPort === undefined) args.push('--headless');
  else args.push('--ui-port', String(options.uiPort));
  return args;
}

async function waitUntilServing(address: string, namespace: string, failure: () => string | undefined): Promise<void> {
  const deadline = performance.now() + READY_TIMEOUT_MS;
  let lastError: unknown;
  while (performance.now() < deadline) {
    const failed = failure();
    if (failed) throw new Error(failed);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.workflowService.describeNamespace({ namespace });
        return;
      } finally {
        await connection.close();
      }
    } catch (error) {
      lastError = error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  throw new Error(`the Temporal dev server did not answer on ${address} within ${READY_TIMEOUT_MS / 1000} s: ${String(lastError)}`);
}

/** The command line of process `pid`, or '' when there is no such process. */
async function commandLine(pid: number): Promise<string> {
  const proc = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (proc !== undefined) return proc.replaceAll('\0', ' ');
  // No /proc (macOS): ask ps.
  return new Promise((resolve) =>
    execFile('ps', ['-o', 'args=', '-p', String(pid)], (error, stdout) => resolve(error ? '' : stdout.trim())),
  );
}

/**
 * True once process `pid` has exited. Its command line is no test: the main thread of a Go
 * program that is shutting down is already a zombie with an empty command line while its
 * other threads still hold the ports.
 */
async function processGone(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
  // A zombie no one has reaped yet (PID 1 of a container may never) has released everything.
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return /^State:\s+Z/m.test(status) && /^Threads:\s+1$/m.test(status);
}

/**
 * Stops a dev server left behind by a process that was killed before it could stop it:
 * the pid in the pid file, if that process is still a dev server on this state folder.
 */
async function stopLeftover(pidFile: string, dbFile: string): Promise<void> {
  const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
  const cmdline = pid ? await commandLine(pid) : '';
  if (cmdline.includes('start-dev') && cmdline.includes(dbFile)) {
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      try {
        process.kill(pid, signal);
      } catch {
        break; // gone already
      }
      for (let i = 0; i < 100 && !(await processGone(pid)); i += 1) await new Promise((resolve) => setTimeout(resolve, 100));
      if (await processGone(pid)) break;
    }
  }
  await rm(pidFile, { force: true });
}

function assertPortFree(host: string, port: number, variable: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `cannot start the Temporal dev server: ${host}:${port} is in use (${error.code ?? error.message}); ` +
            `is another \`npm start\` running? Set ${variable}, or TEMPORAL_ADDRESS to use a running Temporal server`,
        ),
      ),
    );
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * Starts `temporal server start-dev` as a child process with the project's search
 * attributes registered, and resolves once it serves the namespace. Without a CLI on
 * this machine it falls back to the CLI download that `@temporalio/testing` does.
 */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const address = `${options.ip ?? '127.0.0.1'}:${options.port}`;
  const uiUrl = options.uiPort === undefined ? undefined : `http://${options.ip ?? '127.0.0.1'}:${options.uiPort}`;
  const cli = findTemporalCli(options.cliPath);
  const pidFile = options.stateDir && path.join(options.stateDir, 'temporal.pid');
  if (options.stateDir) await mkdir(options.stateDir, { recursive: true });
  if (pidFile) await stopLeftover(pidFile, path.join(options.stateDir!, 'temporal.db'));
  // Checked first: a Temporal server already on the port (another start's, or one a killed start
  // left behind) would answer the readiness probe while our own dev server fails to bind, and the
  // service would quietly use someone else's.
  await assertPortFree(options.ip ?? '127.0.0.1', options.port, 'TEMPORAL_PORT');
  if (options.uiPort !== undefined) await assertPortFree(options.ip ?? '127.0.0.1', options.uiPort, 'TEMPORAL_UI_PORT');
  // The downloaded server's process is the SDK's to start and stop, so it keeps no pid file: one
  // a killed start left behind makes the next start stop here, on its port, naming it.
  if (!cli) return startDownloadedDevServer(options, address, uiUrl);
  const child = spawn(cli, devServerArgs(options), { stdio: ['ignore', 'pipe', 'pipe'] });
  let spawnError: Error | undefined;
  child.once('error', (error) => (spawnError = error));
  // The first and the last output, for the error message when the server does not come up (a Go
  // panic says why in its first line and where in the stack that follows).
  let output = '';
  let dropped = false;
  const keepEnds = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > 3_000) {
      output = `${output.slice(0, 1_000)}${output.slice(-2_000)}`;
      dropped = true;
    }
  };
  const printed = () => (dropped ? `${output.slice(0, 1_000)}\n…\n${output.slice(1_000)}` : output).trim();
  child.stdout?.on('data', keepEnds);
  child.stderr?.on('data', keepEnds);
  if (options.stateDir) {
    const log = createWriteStream(path.join(options.stateDir, 'temporal.log'), { flags: 'a' });
    // Not pipe(): the first of the two streams to end would end the log under the other.
    child.stdout?.on('data', (chunk: Buffer) => log.write(chunk));
    child.stderr?.on('data', (chunk: Buffer) => log.write(chunk));
    child.once('close', () => log.end());
  }
  if (pidFile && child.pid) await writeFile(pidFile, String(child.pid));
  const stop = async () => {
    await stopChild(child);
    // Only our own pid file: after a crash, a newer dev server may have written its own.
    if (pidFile && (await readFile(pidFile, 'utf8').catch(() => '')).trim() === String(child.pid)) {
      await rm(pidFile, { force: true });
    }
  };
  const failure = () => {
    if (spawnError) return `cannot run the Temporal CLI ${cli}: ${spawnError.message}`;
    if (child.exitCode === null && child.signalCode === null) return undefined;
    return `the Temporal dev server exited (${child.exitCode ?? child.signalCode}) before it was ready${printed() ? `:\n${printed()}` : ''}`;
  };
  try {
    await waitUntilServing(address, options.namespace, failure);
  } catch (error) {
    await stop();
    throw error;
  }
  return { address, uiUrl, stop };
}

async function startDownloadedDevServer(
  options: DevServerOptions,
  address: string,
  uiUrl: string | undefined,
): Promise<DevServer> {
  let env: TestWorkflowEnvironment;
  try {
    env = await TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'cached-download' },
        ip: options.ip ?? '127.0.0.1',
        port: options.port,
        namespace: options.namespace,
        ui: options.uiPort !== undefined,
        ...(options.uiPort !== undefined ? { uiPort: options.uiPort } : {}),
        ...(options.stateDir ? { dbFilename: path.join(options.stateDir, 'temporal.db') } : {}),
        searchAttributes: [...SEARCH_ATTRIBUTES],
        extraArgs: tuningArgs(options),
      },
    });
  } catch (error) {
    throw new Error(
      'No Temporal CLI is available: none in TEMPORAL_CLI_PATH, on PATH or in .tools/bin, and the download failed ' +
        `(${String(error)}). Install Go >= 1.25 and run \`node scripts/temporal-tools.mjs\`, or install the Temporal CLI.`,
    );
  }
  return { address, uiUrl, stop: () => env.teardown() };
}
