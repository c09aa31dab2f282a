import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { EMBEDDED_LOCK_FILE, startEmbeddedPostgres } from '../src/local/embedded-database.ts';
import { launchChromium, openPortalLink } from './support/browser.ts';
import {
  embeddedEnv,
  freePorts,
  killStarted,
  lastLines,
  startService,
  waitForExit,
  waitForReady,
  type Ports,
} from './support/embedded-service.ts';
import { freePort } from './support/ports.ts';

const projectRoot = path.resolve(import.meta.dirname, '..');
const V2 = '/api-gateway/v2';

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
    metrics: true,
    sdkMetrics: true,
  });
}

let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'runtime-test-'));
});
// The dev server is in the service's process group, so killing the group reaches it too.
afterEach(killStarted);
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
      const first = startService(env);
      await waitForReady(first, ports.api);
      expect((await fetch(`http://127.0.0.1:${ports.ui}/`)).status).toBe(200);
      // One /metrics, on its own loopback port, with the API's and the worker's figures.
      expect((await fetch(`${api}/metrics`)).status).toBe(404);
      const metrics = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
      expect(metrics).toContain('webhook_events_accepted_total');
      expect(metrics).toContain('Temporal SDK runtime metrics');
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
        await openPortalLink(page, link.url);
        expect(page.url()).toBe(`${api}/portal`);
        await expect(page.locator('tbody').textContent()).resolves.toContain('https://example.com/hooks');
      } finally {
        await browser.close();
      }

      first.child.kill('SIGTERM');
      expect(await waitForExit(first)).toEqual({ code: 0, signal: null });
      await expectNothingLeft([firstTemporalPid, firstDatabasePid], ports);

      // Second start on the same DATA_DIR: the data and the Temporal namespace are still there.
      const second = startService(env);
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

      const first = startService(env);
      await waitForReady(first, ports.api);
      const orphan = await temporalPid(dataDir);
      const firstDatabasePid = await databasePid(dataDir);
      first.child.kill('SIGKILL'); // the node process only, as the OOM killer does
      await waitForExit(first);
      expect(isRunning(orphan)).toBe(true);

      const second = startService(env);
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

      const service = startService(embeddedEnv(dataDir, ports));
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

      const migrate = startService(embeddedEnv(dataDir, ports), ['migrate']);
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
