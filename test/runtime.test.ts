import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { EMBEDDED_LOCK_FILE, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { launchChromium } from './support/browser.ts';
import { freePort } from './support/ports.ts';
import { serviceNodeFlags } from './support/service-command.ts';

const projectRoot = path.resolve(import.meta.dirname, '..');
const READY_TIMEOUT_MS = 90_000;
const EXIT_TIMEOUT_MS = 30_000;
const V2 = '/api-gateway/v2';

interface Ports {
  api: number;
  temporal: number;
  ui: number;
  pglite: number;
  sdkMetrics: number;
}

async function freePorts(): Promise<Ports> {
  return { api: await freePort(), temporal: await freePort(), ui: await freePort(), pglite: await freePort(), sdkMetrics: await freePort() };
}

/** The environment a user has for `npm start`: embedded defaults, only the ports moved. */
function embeddedEnv(dataDir: string, ports: Ports): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: String(ports.api),
    TEMPORAL_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    PGLITE_PORT: String(ports.pglite),
    TEMPORAL_SDK_METRICS_PORT: String(ports.sdkMetrics),
    METRICS_PORT: String(ports.sdkMetrics),
    LOG_LEVEL: 'info',
  };
  delete env.DATABASE_URL;
  delete env.TEMPORAL_ADDRESS;
  delete env.SECRET_ENCRYPTION_KEY;
  delete env.EVENT_PRODUCER_TOKEN;
  return env;
}

interface Service {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: Service[] = [];

/** `src/main.ts [role]` with the flags of `npm start`, as its own process group, as a terminal runs it. */
function startProcess(env: NodeJS.ProcessEnv, args: string[] = []): Service {
  const child = spawn(process.execPath, [...serviceNodeFlags(), 'src/main.ts', ...args], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const service = { child, output: () => output, exited };
  started.push(service);
  return service;
}

function lastLines(text: string, count = 30): string {
  return text.trimEnd().split('\n').slice(-count).join('\n');
}

async function waitForReady(service: Service, port: number): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited = false;
  void service.exited.then(() => (exited = true));
  let last = '';
  while (Date.now() < deadline && !exited) {
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

async function waitForExit(service: Service): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the service did not exit within ${EXIT_TIMEOUT_MS / 1000} s:\n${lastLines(service.output())}`)),
      EXIT_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([service.exited, limit]);
  } finally {
    clearTimeout(timer);
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True when a new listener can bind 127.0.0.1:port. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function runCli(env: NodeJS.ProcessEnv, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npx', ['tsx', 'src/cli/index.ts', ...args], { cwd: projectRoot, env, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function temporalPid(dataDir: string): Promise<number> {
  return Number((await readFile(path.join(dataDir, 'temporal', 'temporal.pid'), 'utf8')).trim());
}

/** The pid of the embedded database process, from its lock file. */
async function databasePid(dataDir: string): Promise<number> {
  return Number((await readFile(path.join(dataDir, 'pglite', EMBEDDED_LOCK_FILE), 'utf8')).split(' ')[0]);
}

/** Everything the service started is gone: the dev server's and the database's processes and every port. */
async function expectNothingLeft(pids: number[], ports: Ports): Promise<void> {
  expect(pids.filter(isRunning)).toEqual([]);
  const free = await Promise.all(Object.values(ports).map((port) => portIsFree(port)));
  expect(Object.fromEntries(Object.keys(ports).map((name, i) => [name, free[i]]))).toEqual({
    api: true,
    temporal: true,
    ui: true,
    pglite: true,
    sdkMetrics: true,
  });
}

let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'runtime-test-'));
});
afterEach(async () => {
  // A failed test must not leave a service (or its dev server) behind.
  // The dev server is in the service's process group, so this reaches it too.
  for (const service of started.splice(0)) {
    try {
      process.kill(-service.child.pid!, 'SIGKILL');
    } catch {
      // the group is gone: nothing was left
    }
  }
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('the one-command runtime (`npm start`)', () => {
  it(
    'serves the API, the customer portal and the Temporal UI, accepts a CLI key, stops cleanly on SIGTERM and on Ctrl-C, and keeps its data',
    async () => {
      const dataDir = path.join(tmp, 'service');
      const ports = await freePorts();
      const env = embeddedEnv(dataDir, ports);
      const api = `http://127.0.0.1:${ports.api}`;

      // First start: everything from nothing.
      const first = startProcess(env);
      await waitForReady(first, ports.api);
      expect((await fetch(`http://127.0.0.1:${ports.ui}/`)).status).toBe(200);
      const firstTemporalPid = await temporalPid(dataDir);
      expect(isRunning(firstTemporalPid)).toBe(true);
      const firstDatabasePid = await databasePid(dataDir);
      expect(firstDatabasePid).not.toBe(first.child.pid);
      expect(isRunning(firstDatabasePid)).toBe(true);

      const created = await runCli(env, ['keys', 'create', '--project', 'p1', '--services', 'webhooks', '--json']);
      expect(created.stderr.replace(/^npm warn .*\n/gm, '')).toBe('');
      expect(created.code).toBe(0);
      const key = JSON.parse(created.stdout) as { id: string; project_id: string; token: string };
      expect(key.project_id).toBe('p1');

      const createResponse = await fetch(`${api}${V2}/webhooks`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key.token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ api_key_id: key.id, url: 'https://example.com/hooks', events: ['docauth.completed'] }),
      });
      expect(createResponse.status).toBe(201);
      const webhook = ((await createResponse.json()) as { data: { id: string; project_id: string } }).data;
      expect(webhook.project_id).toBe('p1');

      // The customer portal, from a CLI link, in Chromium.
      const linked = await runCli(env, ['portal', 'link', '--project', 'p1', '--json']);
      expect(linked.code).toBe(0);
      const link = JSON.parse(linked.stdout) as { url: string };
      expect(link.url.startsWith(`${api}/portal/enter?token=`)).toBe(true);
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        await page.goto(link.url);
        expect(page.url()).toBe(`${api}/portal`);
        await expect(page.locator('tbody').textContent()).resolves.toContain('https://example.com/hooks');
      } finally {
        await browser.close();
      }

      first.child.kill('SIGTERM');
      expect(await waitForExit(first)).toEqual({ code: 0, signal: null });
      await expectNothingLeft([firstTemporalPid, firstDatabasePid], ports);

      // Second start on the same DATA_DIR: the data and the Temporal namespace are still there.
      const second = startProcess(env);
      await waitForReady(second, ports.api);
      const secondTemporalPid = await temporalPid(dataDir);
      const secondDatabasePid = await databasePid(dataDir);

      const listResponse = await fetch(`${api}${V2}/webhooks`, { headers: { Authorization: `Bearer ${key.token}` } });
      expect(listResponse.status).toBe(200);
      const listed = ((await listResponse.json()) as { data: { id: string }[] }).data;
      expect(listed.map((item) => item.id)).toEqual([webhook.id]);

      const connection = await Connection.connect({ address: `127.0.0.1:${ports.temporal}` });
      try {
        const described = await connection.workflowService.describeNamespace({ namespace: 'default' });
        expect(described.namespaceInfo?.name).toBe('default');
      } finally {
        await connection.close();
      }

      // Ctrl-C in a terminal signals the whole process group, the dev server included.
      process.kill(-second.child.pid!, 'SIGINT');
      expect(await waitForExit(second)).toEqual({ code: 0, signal: null });
      await expectNothingLeft([secondTemporalPid, secondDatabasePid], ports);
    },
    240_000,
  );

  it(
    'starts again after being killed with SIGKILL, stopping the dev server the killed process left behind',
    async () => {
      const dataDir = path.join(tmp, 'crashed');
      const ports = await freePorts();
      const env = embeddedEnv(dataDir, ports);

      const first = startProcess(env);
      await waitForReady(first, ports.api);
      const orphan = await temporalPid(dataDir);
      const firstDatabasePid = await databasePid(dataDir);
      first.child.kill('SIGKILL'); // the node process only, as the OOM killer does
      await waitForExit(first);
      expect(isRunning(orphan)).toBe(true);

      const second = startProcess(env);
      await waitForReady(second, ports.api);
      expect(isRunning(orphan)).toBe(false);
      const secondTemporalPid = await temporalPid(dataDir);
      expect(secondTemporalPid).not.toBe(orphan);
      // The database process closed by itself when its parent died.
      expect(isRunning(firstDatabasePid)).toBe(false);
      const secondDatabasePid = await databasePid(dataDir);

      second.child.kill('SIGTERM');
      expect(await waitForExit(second)).toEqual({ code: 0, signal: null });
      await expectNothingLeft([secondTemporalPid, secondDatabasePid], ports);
    },
    240_000,
  );

  it(
    'refuses to start when another Temporal server has TEMPORAL_PORT, rather than quietly using it',
    async () => {
      const dataDir = path.join(tmp, 'port-taken');
      const taken = Number(inject('temporalAddress').split(':').pop());
      const ports = { ...(await freePorts()), temporal: taken };

      const service = startProcess(embeddedEnv(dataDir, ports));
      const exit = await waitForExit(service);

      expect(exit).toEqual({ code: 1, signal: null });
      expect(service.output()).toContain(`127.0.0.1:${taken} is in use`);
      expect(service.output()).toContain('TEMPORAL_PORT');
      const { temporal: _, ...ownPorts } = ports;
      for (const port of Object.values(ownPorts)) expect(await portIsFree(port)).toBe(true);
    },
    180_000,
  );

  it(
    'applies the migrations to a fresh DATA_DIR with the `migrate` role and exits 0',
    async () => {
      const dataDir = path.join(tmp, 'migrate-only');
      const ports = await freePorts();

      const migrate = startProcess(embeddedEnv(dataDir, ports), ['migrate']);
      const exit = await waitForExit(migrate);

      expect(exit, lastLines(migrate.output())).toEqual({ code: 0, signal: null });
      expect(await portIsFree(ports.pglite)).toBe(true);
      const embedded = await startEmbeddedPostgres(path.join(dataDir, 'pglite'), await freePort());
      const client = postgres(embedded.url, { max: 1, onnotice: () => {} });
      try {
        const [row] = await client`select count(*)::int as n from drizzle.__drizzle_migrations`;
        expect(row!.n).toBeGreaterThan(0);
        expect(await client`select to_regclass('public.webhooks')::text as t`).toEqual([{ t: 'webhooks' }]);
      } finally {
        await client.end();
        await embedded.stop();
      }
    },
    180_000,
  );
});
