import { serve, type ServerType } from '@hono/node-server';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID, X509Certificate } from 'node:crypto';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { commands, runCli } from '../src/cli/commands.ts';
import { localCertificate } from '../src/cli/certificate.ts';
import { createApiKey, revokeApiKey } from '../src/db/queries/api-keys.ts';
import { insertWebhook } from '../src/db/queries/webhooks.ts';
import { events } from '../src/db/schema.ts';
import { generateEncryptionKey, SecretBox } from '../src/secrets/crypto.ts';
import { openSharedTestDatabase } from './support/database.ts';
import { docauthData, startHarness, type Harness } from './support/harness.ts';

const run = promisify(execFile);
const projectRoot = path.resolve(import.meta.dirname, '..');
const CLI = ['--import', 'tsx', 'src/cli/index.ts'];
/**
 * Each command is a new Node process that loads the CLI through tsx: about a second here, several
 * on a busy 2-core machine, so a test that runs 17 of them in a row can outlast the suite's minute.
 */
const COMMANDS_TIMEOUT_MS = 180_000;

let h: Harness;
let server: ServerType;
let apiUrl: string;
let key: { id: string; projectId: string; token: string };
let certDir: string;

function env(extra: Record<string, string> = {}) {
  const { DATABASE_URL: _db, ...rest } = process.env;
  return { ...rest, WEBHOOKS_API_URL: apiUrl, WEBHOOKS_API_TOKEN: key.token, LOG_LEVEL: 'silent', ...extra };
}

async function cli(args: string[], extraEnv: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await run(process.execPath, [...CLI, ...args], { env: env(extraEnv) });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

beforeAll(async () => {
  certDir = mkdtempSync(path.join(os.tmpdir(), 'listen-cert-'));
  const { certFile } = localCertificate(certDir, 1);
  h = await startHarness({ worker: true, delivery: { caFile: certFile } });
  key = await h.createKey();
  server = await new Promise((resolve) => {
    const started = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(started));
  });
  const address = server.address();
  apiUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await h?.stop();
  rmSync(certDir, { recursive: true, force: true });
});

describe('webhooks and deliveries commands', { timeout: COMMANDS_TIMEOUT_MS }, () => {
  it('create, list, get, update, rotate-secret and delete a webhook, with --json output', async () => {
    const created = await cli(['webhooks', 'create', '--url', 'https://example.com/in', '--header', 'X-Tag=blue', '--rate-limit', '2.5', '--json']);
    expect(created.code).toBe(0);
    const webhook = JSON.parse(created.stdout);
    expect(webhook).toMatchObject({ api_key_id: key.id, url: 'https://example.com/in', headers: { 'X-Tag': 'blue' }, status: 'active', rate_limit: 2.5 });
    expect(webhook.secret).toMatch(/^whsec_/);

    const list = JSON.parse((await cli(['webhooks', 'list', '--json'])).stdout);
    expect(list.data.map((w: { id: string }) => w.id)).toContain(webhook.id);
    const table = await cli(['webhooks', 'list']);
    expect(table.stdout).toMatch(/^ID\s+URL\s+EVENTS\s+STATUS/m);
    expect(table.stdout).toContain(webhook.id);

    const got = JSON.parse((await cli(['webhooks', 'get', webhook.id, '--json'])).stdout);
    expect(got).not.toHaveProperty('secret');
    const updated = JSON.parse((await cli(['webhooks', 'update', webhook.id, '--status', 'disabled', '--rate-limit', 'none', '--json'])).stdout);
    expect(updated.status).toBe('disabled');
    expect(updated).not.toHaveProperty('rate_limit');
    const refused = await cli(['webhooks', 'update', webhook.id, '--rate-limit', 'fast']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('rate_limit: must be a number of deliveries per second');
    const rotated = JSON.parse((await cli(['webhooks', 'rotate-secret', webhook.id, '--json'])).stdout);
    expect(rotated.secret).not.toBe(webhook.secret);
    expect(rotated).not.toHaveProperty('previous_secret_expires_at');
    const graced = JSON.parse((await cli(['webhooks', 'rotate-secret', webhook.id, '--grace-period', '24h', '--json'])).stdout);
    expect(Date.parse(graced.previous_secret_expires_at) - Date.now()).toBeGreaterThan(86_300_000);
    const shown = JSON.parse((await cli(['webhooks', 'get', webhook.id, '--json'])).stdout);
    expect(shown.previous_secret_expires_at).toBe(graced.previous_secret_expires_at);
    const tooLong = await cli(['webhooks', 'rotate-secret', webhook.id, '--grace-period', '8d']);
    expect(tooLong.code).not.toBe(0);
    expect(tooLong.stderr).toContain('grace_period: must be at most 604800 seconds (7 days)');
    const notDuration = await cli(['webhooks', 'rotate-secret', webhook.id, '--grace-period', 'soon']);
    expect(notDuration.stderr).toContain('--grace-period must be a duration such as 90s, 30m, 24h or 7d');
    const standard = JSON.parse((await cli(['webhooks', 'update', webhook.id, '--standard-webhooks', 'true', '--json'])).stdout);
    expect(standard.standard_webhooks).toBe(true);
    expect((await cli(['webhooks', 'update', webhook.id, '--standard-webhooks', 'yes'])).stderr).toContain('--standard-webhooks must be true or false');
    expect((await cli(['webhooks', 'delete', webhook.id])).stdout).toContain(`Webhook ${webhook.id} deleted.`);
  });

  it('starts, follows and cancels a bulk retry operation', async () => {
    const webhook = JSON.parse((await cli(['webhooks', 'create', '--url', 'https://example.com/bulk', '--json'])).stdout);
    const started = await cli(['deliveries', 'retry', webhook.id, '--all', '--status', 'dead_letter,failed', '--since', '2026-01-01T00:00:00Z', '--json']);
    expect(started.stderr).toBe('');
    const operation = JSON.parse(started.stdout);
    expect(operation).toEqual({ id: expect.stringMatching(/^op_/), status: 'running', matched: 0 });
    let current: Record<string, unknown> = {};
    for (let i = 0; i < 100 && current.status !== 'completed'; i += 1) {
      current = JSON.parse((await cli(['operations', 'get', webhook.id, operation.id, '--json'])).stdout);
      if (current.status !== 'completed') await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(current).toEqual({ id: operation.id, status: 'completed', matched: 0, retried: 0, skipped: 0 });
    const cancel = await cli(['operations', 'cancel', webhook.id, operation.id]);
    expect(cancel.stdout.split('\n')[0]).toBe(`Operation ${operation.id} is already completed`);
    const invalid = await cli(['deliveries', 'retry', webhook.id, '--all', '--status', 'pending']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^error: 400 invalid_request: status\.0/);
    // The project's later events must not fan out to this webhook.
    expect((await cli(['webhooks', 'delete', webhook.id])).code).toBe(0);
  });

  it('lists with --json as the API pages: data, and meta with the cursor of the next page', async () => {
    const own = await h.createKey();
    const created: string[] = [];
    for (const name of ['a', 'b', 'c']) {
      const answer = await h.request('POST', '/api-gateway/v2/webhooks', {
        token: own.token,
        body: { api_key_id: own.id, url: `https://example.com/${name}`, events: ['docauth.completed'] },
      });
      expect(answer.status).toBe(201);
      created.push((answer.body as { data: { id: string } }).data.id);
    }
    // Oldest first, in id order (two made in the same millisecond sort by their random part).
    created.sort();
    const asOwner = { WEBHOOKS_API_TOKEN: own.token };
    const first = JSON.parse((await cli(['webhooks', 'list', '--limit', '2', '--json'], asOwner)).stdout);
    expect(first.data.map((w: { id: string }) => w.id)).toEqual(created.slice(0, 2));
    expect(first.meta).toMatchObject({ has_more: true, next_cursor: created[1] });
    const second = JSON.parse((await cli(['webhooks', 'list', '--limit', '2', '--starting-after', first.meta.next_cursor, '--json'], asOwner)).stdout);
    expect(second.data.map((w: { id: string }) => w.id)).toEqual(created.slice(2));
    expect(second.meta.has_more).toBe(false);
    expect(second.meta).not.toHaveProperty('next_cursor');
  });

  it('prints one clear line and exits 1 on errors, 2 on a wrong command line', async () => {
    const missing = await cli(['webhooks', 'get', 'wh_missing']);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe('error: 404 not_found: webhook wh_missing not found');
    const invalid = await cli(['webhooks', 'create', '--url', 'http://plain.example.com']);
    expect(invalid.stderr.trim()).toBe('error: 400 invalid_request: url: must use https');
    const noToken = await cli(['webhooks', 'list'], { WEBHOOKS_API_TOKEN: '' });
    expect(noToken.stderr.trim()).toBe('error: no API token: pass --token or set WEBHOOKS_API_TOKEN');
    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    const badFlag = await cli(['webhooks', 'list', '--nope']);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/^error: Unknown option '--nope'/);
  });

  it('lets a developer watch a real delivery arrive with `listen`, then inspect it with `deliveries`', async () => {
    const listener: ChildProcess = spawn(
      process.execPath,
      [...CLI, 'listen', '--port', '0', '--create-webhook', '--json', '--cert-dir', certDir, '--status', '500'],
      { env: env() },
    );
    const lines = createInterface({ input: listener.stdout! });
    const received: Record<string, any>[] = [];
    const waiters: (() => void)[] = [];
    lines.on('line', (line) => {
      received.push(JSON.parse(line));
      waiters.splice(0).forEach((wake) => wake());
    });
    const next = async (predicate: (entry: Record<string, any>) => boolean) => {
      for (;;) {
        const found = received.find(predicate);
        if (found) return found;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    };
    try {
      const { webhook_id: webhookId } = await next((e) => 'webhook_id' in e);
      await next((e) => 'listening' in e);
      const data = docauthData();
      const published = await h.publish({ project_id: key.projectId, event: 'docauth.completed', data });
      const deliveryId = published.body.data.delivery_ids[0];
      const delivery = await next((e) => e.delivery_id === deliveryId);
      expect(delivery).toMatchObject({ event: 'docauth.completed', signature: 'verified', answered: 500 });
      expect(delivery.body).toMatchObject({ id: deliveryId, api_version: 'v1', data });

      const attempts = JSON.parse((await cli(['deliveries', 'attempts', webhookId, deliveryId, '--json'])).stdout);
      expect(attempts[0]).toMatchObject({ attempt_number: 1, outcome: 'http_error', status_code: 500 });
      const listed = JSON.parse((await cli(['deliveries', 'list', webhookId, '--json'])).stdout);
      expect(listed.data.map((d: { id: string }) => d.id)).toEqual([deliveryId]);
      expect(listed.meta).toMatchObject({ has_more: false });
      const got = JSON.parse((await cli(['deliveries', 'get', webhookId, deliveryId, '--json'])).stdout);
      expect(['failed', 'processing', 'pending']).toContain(got.status);
    } finally {
      listener.kill('SIGTERM');
      await new Promise((resolve) => listener.once('exit', resolve));
    }
    const remaining = JSON.parse((await cli(['webhooks', 'list', '--json'])).stdout);
    expect(remaining.data).toEqual([]);
  });
});

describe('listen, when things go wrong', { timeout: COMMANDS_TIMEOUT_MS }, () => {
  it('says so, exits 1 and names the webhook it registered when it cannot delete it on exit', async () => {
    const own = await h.createKey();
    const listener: ChildProcess = spawn(process.execPath, [...CLI, 'listen', '--port', '0', '--create-webhook', '--json', '--cert-dir', certDir], {
      env: env({ WEBHOOKS_API_TOKEN: own.token }),
    });
    let stderr = '';
    listener.stderr!.on('data', (chunk) => (stderr += String(chunk)));
    const exited = new Promise<number | null>((resolve) => listener.once('exit', (code) => resolve(code)));
    const lines = createInterface({ input: listener.stdout! });
    const webhookId = await new Promise<string>((resolve) => lines.on('line', (line) => 'webhook_id' in JSON.parse(line) && resolve(JSON.parse(line).webhook_id)));
    // Its key revoked meanwhile: the DELETE on exit is refused.
    await revokeApiKey(h.db, own.id);
    listener.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(stderr).toContain(`could not delete webhook ${webhookId} (401`);
    expect(stderr).toContain(`npm run cli -- webhooks delete ${webhookId}`);
  });

  it('makes its certificate anew once it has expired (or is about to), and says it did', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'listen-renew-'));
    try {
      const first = localCertificate(dir, 1);
      expect(first.renewed).toBe(false);
      expect(localCertificate(dir).cert).toBe(first.cert);
      const dayAfter = localCertificate(dir, 30, undefined, Date.now() + 2 * 86_400_000);
      expect(dayAfter.renewed).toBe(true);
      expect(dayAfter.cert).not.toBe(first.cert);
      expect(Date.parse(new X509Certificate(dayAfter.cert).validTo)).toBeGreaterThan(Date.now() + 29 * 86_400_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('events publish', { timeout: COMMANDS_TIMEOUT_MS }, () => {
  it('validates the data file and names the bad field', async () => {
    const file = path.join(certDir, 'bad.json');
    writeFileSync(file, JSON.stringify({ ...docauthData(), result: 'maybe' }));
    const result = await cli(['events', 'publish', '--project', 'p', '--data-file', file]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe('error: invalid event: data.result: Invalid option: expected one of "pass"|"fail"');
  });

  it('names the stored event and its --id when its workflows cannot start, and the same --id publishes it once', async () => {
    const shared = await openSharedTestDatabase();
    try {
      const box = new SecretBox(generateEncryptionKey());
      const { key } = await createApiKey(shared.db, { projectId: 'acme', services: ['webhooks'] });
      await insertWebhook(shared.db, box, 'acme', { apiKeyId: key.id, url: 'https://example.com/in', events: ['docauth.completed'], headers: {}, secret: 'whsec_test' });
      const file = path.join(certDir, 'event.json');
      writeFileSync(file, JSON.stringify(docauthData()));
      const publish = ['events', 'publish', '--project', 'acme', '--data-file', file];
      // Its own task queue: no worker takes the workflow the second run starts.
      const stack = { ...shared.cliEnv, SECRET_ENCRYPTION_KEY: generateEncryptionKey(), TEMPORAL_ADDRESS: inject('temporalAddress'), TEMPORAL_NAMESPACE: 'default', TEMPORAL_TASK_QUEUE: `cli-${randomUUID()}` };

      const failed = await cli(publish, { ...stack, TEMPORAL_NAMESPACE: 'no-such-namespace' });
      expect(failed.code).toBe(1);
      const [, id, deliveryId] = /^error: the event of project acme with id (\S+) is stored with 1 delivery \((dlv_\w+)\), but publishing it did not finish: .*no-such-namespace/.exec(failed.stderr) ?? [];
      expect(id, failed.stderr).toBeDefined();
      expect(failed.stderr).toContain(`run again with --id ${id}`);
      const stored = await shared.db.select().from(events).where(eq(events.projectId, 'acme'));
      expect(stored).toEqual([expect.objectContaining({ producerEventId: id, dispatchedAt: null })]);

      const again = await cli([...publish, '--id', id!, '--json'], stack);
      expect(again.stderr).toBe('');
      expect(JSON.parse(again.stdout)).toEqual({ event_id: stored[0]!.id, id, delivery_ids: [deliveryId], created: false });
      expect(await shared.db.select().from(events).where(eq(events.projectId, 'acme'))).toEqual([expect.objectContaining({ dispatchedAt: expect.any(Date) })]);
      const workflow = h.client.workflow.getHandle(deliveryId!);
      expect((await workflow.describe()).status.name).toBe('RUNNING');
      await workflow.terminate('the test is over');
    } finally {
      await shared.close();
    }
  });
});

describe('conventions', () => {
  /** Runs the CLI in this process, with `env` over its environment, and returns its exit code and what it printed. */
  async function inProcess(argv: string[], env: Record<string, string | undefined> = {}) {
    const stdout: string[] = [];
    const stderr: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void stdout.push(String(line)));
    const error = vi.spyOn(console, 'error').mockImplementation((line: unknown) => void stderr.push(String(line)));
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    try {
      return { code: await runCli(argv), stdout: stdout.join('\n'), stderr: stderr.join('\n') };
    } finally {
      vi.unstubAllEnvs();
      log.mockRestore();
      error.mockRestore();
    }
  }

  it('prints the usage on stdout and exits 0 for --help and -h, on every command and subcommand', async () => {
    for (const flag of ['--help', '-h']) {
      const top = await inProcess([flag]);
      expect(top).toMatchObject({ code: 0, stderr: '' });
      for (const name of Object.keys(commands)) expect(top.stdout).toContain(`  ${name} `);
      for (const [name, load] of Object.entries(commands)) {
        const command = await load();
        for (const argv of [[name, flag], ...command.actions.map((action) => [name, action, flag])]) {
          expect(await inProcess(argv), argv.join(' ')).toEqual({ code: 0, stdout: command.usage, stderr: '' });
        }
      }
    }
  });

  it('exits 2 with the usage on stderr for a missing or unknown subcommand, even without a token', async () => {
    for (const [name, load] of Object.entries(commands)) {
      const command = await load();
      if (command.actions.length === 0) continue;
      expect(await inProcess([name]), name).toEqual({ code: 2, stdout: '', stderr: command.usage });
      const unknown = await inProcess([name, 'frobnicate']);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toBe(`error: unknown ${name} command "frobnicate"\n${command.usage}`);
    }
  });

  it('exits 2 for an invalid argument, checked before the token is looked for', async () => {
    const file = path.join(certDir, 'usage-event.json');
    writeFileSync(file, JSON.stringify(docauthData()));
    const publish = ['events', 'publish', '--project', 'p', '--data-file', file];
    for (const [argv, message] of [
      [['webhooks', 'get'], 'error: a webhook id is required'],
      [['webhooks', 'create', '--url', 'https://example.com/in', '--header', 'Foo'], 'error: --header takes Name=value, got "Foo"'],
      [['deliveries', 'get', 'wh_x'], 'error: a delivery id is required'],
      [['operations', 'get', 'wh_x'], 'error: an operation id is required'],
      [[...publish, '--occurred-at', 'yesterday'], 'error: --occurred-at must be an ISO 8601 timestamp with a time zone, not "yesterday"'],
      [[...publish, '--id', 'no spaces'], 'error: --id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -, not "no spaces"'],
    ] as const) {
      const result = await inProcess([...argv], { WEBHOOKS_API_TOKEN: undefined });
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stderr.split('\n')[0]).toBe(message);
    }
  });

  it('exits 2 for a name every object inherits (constructor, toString, __proto__): it is no command', async () => {
    for (const name of ['constructor', 'toString', '__proto__']) {
      expect(await inProcess([name]), name).toEqual({ code: 2, stdout: '', stderr: `error: unknown command "${name}"; run with --help for the list` });
    }
  });

  it('runs as the installed `webhooks` bin: --version prints the package version, usage errors exit 2', async () => {
    const manifest = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> };
    const bin = path.join(projectRoot, manifest.bin.webhooks!);
    const { stdout } = await run(bin, ['--version'], { env: env({ WEBHOOKS_API_TOKEN: '' }) });
    expect(stdout).toBe(`${manifest.version}\n`);
    const usage = await run(bin, ['webhooks'], { env: env({ WEBHOOKS_API_TOKEN: '' }) }).catch((error: { code: number; stderr: string }) => error);
    expect(usage).toMatchObject({ code: 2, stderr: `${(await commands.webhooks!()).usage}\n` });
  });
});
