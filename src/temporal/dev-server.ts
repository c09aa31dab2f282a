import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { findTemporalCli } from '../../scripts/temporal-cli.mjs';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';

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
}

const READY_TIMEOUT_MS = 60_000;

function devServerArgs(options: DevServerOptions): string[] {
  const args = [
    'server', 'start-dev',
    '--ip', options.ip ?? '127.0.0.1',
    '--port', String(options.port),
    '--namespace', options.namespace,
    '--log-level', 'warn',
    '--dynamic-config-value', 'system.enableActivityEagerExecution=true',
  ];
  for (const key of SEARCH_ATTRIBUTES) args.push('--search-attribute', `${key.name}=Keyword`);
  if (options.stateDir) args.push('--db-filename', path.join(options.stateDir, 'temporal.db'));
  if (options.uiPort === undefined) args.push('--headless');
  else args.push('--ui-port', String(options.uiPort));
  return args;
}

async function waitUntilServing(address: string, namespace: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the Temporal dev server exited (${child.exitCode ?? child.signalCode}) before it was ready`);
    }
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

/** Stops a dev server left behind by a process that was killed before it could stop it. */
async function stopLeftover(pidFile: string): Promise<void> {
  const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
  if (!pid) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (cmdline.includes('start-dev')) {
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 50 && (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  await rm(pidFile, { force: true });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
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
  if (!cli) return startDownloadedDevServer(options, address, uiUrl);

  const pidFile = options.stateDir && path.join(options.stateDir, 'temporal.pid');
  if (options.stateDir) await mkdir(options.stateDir, { recursive: true });
  if (pidFile) await stopLeftover(pidFile);
  const child = spawn(cli, devServerArgs(options), { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = options.stateDir ? createWriteStream(path.join(options.stateDir, 'temporal.log'), { flags: 'a' }) : undefined;
  if (log) {
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
  } else {
    child.stdout?.resume();
    child.stderr?.resume();
  }
  if (pidFile && child.pid) await writeFile(pidFile, String(child.pid));
  const stop = async () => {
    await stopChild(child);
    if (pidFile) await rm(pidFile, { force: true });
  };
  try {
    await waitUntilServing(address, options.namespace, child);
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
        extraArgs: ['--dynamic-config-value', 'system.enableActivityEagerExecution=true'],
      },
    });
  } catch (error) {
    throw new Error(
      'No Temporal CLI is available: none in TEMPORAL_CLI_PATH, on PATH or in .tools/bin, and the download failed ' +
        `(${String(error)}). Install Go >= 1.25 and run \`node scripts/temporal-cli.mjs\`, or install the Temporal CLI.`,
    );
  }
  return { address, uiUrl, stop: () => env.teardown() };
}
