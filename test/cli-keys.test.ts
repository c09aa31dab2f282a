import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/local/embedded-database.ts';
import { authenticateToken, createApiKey, revokeApiKey } from '../src/db/queries/api-keys.ts';
import { redeemPortalLink } from '../src/db/queries/portal-sessions.ts';
import { runCli, type CliResult } from './support/cli.ts';
import { freePort } from './support/ports.ts';

let tmp: string;
let pglitePort: number;
let embedded: EmbeddedPostgres;
let database: DatabaseHandle;

/**
 * Runs the CLI as `npm run cli` does, in embedded mode against PGLITE_PORT (the database this
 * test process serves), with `env` on top.
 */
const cli = (args: string[], port = pglitePort, env: Record<string, string> = {}) =>
  runCli(args, { PGLITE_PORT: String(port), DATA_DIR: tmp, ...env });

function expectOneLineError(result: CliResult, pattern: RegExp, code = 1): void {
  expect(result.code).toBe(code);
  expect(result.stdout).toBe('');
  expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(result.stderr).toMatch(pattern);
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'cli-keys-test-'));
  pglitePort = await freePort();
  embedded = await startEmbeddedPostgres(path.join(tmp, 'pglite'), pglitePort);
  database = await openDatabase({ kind: 'postgres', url: embedded.url, poolMax: 2 });
  await database.migrate();
});
afterAll(async () => {
  await database?.close();
  await embedded?.stop();
  await rm(tmp, { recursive: true, force: true });
});

describe('the keys CLI against the embedded database', { timeout: 120_000 }, () => {
  let created: { id: string; project_id: string; services: string[]; token: string };

  it('creates a key and prints it as one JSON object with the token', async () => {
    const result = await cli(['keys', 'create', '--project', 'p', '--services', 'webhooks', '--json']);

    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    created = JSON.parse(lines[0]!);
    expect(created).toEqual({
      id: expect.stringMatching(/^key_[0-9a-z]{26}$/),
      project_id: 'p',
      services: ['webhooks'],
      token: expect.stringMatching(/^sk_[0-9a-z]{26}_[A-Za-z0-9_-]{43}$/),
    });
  });

  it('prints a token that authenticates as that key', async () => {
    const key = await authenticateToken(database.db, created.token);

    expect(key).toMatchObject({ id: created.id, projectId: 'p', services: ['webhooks'], revokedAt: null });
    expect(await authenticateToken(database.db, `${created.token.slice(0, -1)}x`)).toBeUndefined();
  });

  it('lists the key without its token or hash', async () => {
    const result = await cli(['keys', 'list', '--json']);

    expect(result.code).toBe(0);
    const keys = JSON.parse(result.stdout) as Record<string, unknown>[];
    expect(keys).toContainEqual(
      expect.objectContaining({ id: created.id, project_id: 'p', services: ['webhooks'], created_at: expect.any(String) }),
    );
    for (const key of keys) expect(Object.keys(key).sort()).toEqual(['created_at', 'id', 'project_id', 'services']);
    expect(result.stdout).not.toContain(created.token.slice(-43));
    expect(result.stdout).not.toMatch(/token|hash/i);
  });

  it('revokes the key, after which its token finds a revoked key', async () => {
    const result = await cli(['keys', 'revoke', created.id]);

    expect(result.code).toBe(0);
    expect(result.stdout).toContain(created.id);
    const key = await authenticateToken(database.db, created.token);
    expect(key?.id).toBe(created.id);
    expect(key?.revokedAt).toBeInstanceOf(Date);
  });

  it('fails with one line on stderr and exit code 2 for an unknown command', async () => {
    expectOneLineError(await cli(['frobnicate']), /^error: unknown command "frobnicate"/, 2);
  });

  it('fails with one line on stderr and exit code 2 when --project is missing', async () => {
    expectOneLineError(await cli(['keys', 'create', '--services', 'webhooks']), /^error: --project is required/, 2);
  });

  it('refuses an unknown service name (a typo would make a key every request refuses), before connecting', async () => {
    expectOneLineError(
      await cli(['keys', 'create', '--project', 'p', '--services', 'webhooks,webhook'], await freePort()),
      /^error: unknown service webhook in --services: webhooks or events$/m,
      2,
    );
  });

  it('fails with one line on stderr when revoking an unknown key', async () => {
    expectOneLineError(await cli(['keys', 'revoke', 'key_00000000000000000000000000']), /^error: no active API key key_0{26}$/m);
  });

  it('fails with one line on stderr when revoking an already revoked key', async () => {
    expectOneLineError(await cli(['keys', 'revoke', created.id]), /^error: no active API key /);
  });

  it('tells to run `npm start` or set DATABASE_URL when nothing serves the embedded database', async () => {
    const result = await cli(['keys', 'list'], await freePort());

    expectOneLineError(result, /npm start/);
    expect(result.stderr).toMatch(/DATABASE_URL/);
  });

  it('checks its arguments before connecting, so a mistake is reported even with no database', async () => {
    expectOneLineError(await cli(['keys', 'create', '--services', 'webhooks'], await freePort()), /--project is required/, 2);
  });
});

describe('portal link against the embedded database', { timeout: 120_000 }, () => {
  it("mints a one-time link acting as the project's newest webhooks key, on the CLI's API URL", async () => {
    await createApiKey(database.db, { projectId: 'acme', services: ['webhooks'] });
    const newest = await createApiKey(database.db, { projectId: 'acme', services: ['webhooks'] });
    await createApiKey(database.db, { projectId: 'acme', services: ['billing'] });
    const result = await cli(['portal', 'link', '--project', 'acme', '--json'], pglitePort, { PORT: '8099' });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const link = JSON.parse(result.stdout) as { id: string; url: string; expires_at: string; api_key_id: string };
    expect(link.api_key_id).toBe(newest.key.id);
    expect(link.url).toMatch(/^http:\/\/127\.0\.0\.1:8099\/portal\/enter\?token=plt_[0-9a-z]{26}_[A-Za-z0-9_-]{43}$/);
    const token = new URL(link.url).searchParams.get('token')!;
    const opened = await redeemPortalLink(database.db, token);
    expect(opened?.session).toMatchObject({ id: link.id, projectId: 'acme', apiKeyId: newest.key.id });
    expect(await redeemPortalLink(database.db, token)).toBeUndefined();
  });

  it('uses PUBLIC_URL and the key named with --key, and prints the link for a person', async () => {
    const named = await createApiKey(database.db, { projectId: 'globex', services: ['webhooks'] });
    await createApiKey(database.db, { projectId: 'globex', services: ['webhooks'] });
    const result = await cli(['portal', 'link', '--project', 'globex', '--key', named.key.id], pglitePort, { PUBLIC_URL: 'https://hooks.example.com' });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`acting as API key ${named.key.id}`);
    expect(result.stdout).toMatch(/\n {2}https:\/\/hooks\.example\.com\/portal\/enter\?token=plt_/);
  });

  it('refuses, in one line, a project without a usable key, a revoked or foreign --key, and a missing --project', async () => {
    expectOneLineError(await cli(['portal', 'link', '--project', 'nobody']), /project nobody has no active API key with the webhooks service; create one with: keys create --project nobody --services webhooks/);
    const revoked = await createApiKey(database.db, { projectId: 'initech', services: ['webhooks'] });
    await revokeApiKey(database.db, revoked.key.id);
    expectOneLineError(await cli(['portal', 'link', '--project', 'initech', '--key', revoked.key.id]), /is not an active API key of project initech/);
    const foreign = await createApiKey(database.db, { projectId: 'other', services: ['webhooks'] });
    expectOneLineError(await cli(['portal', 'link', '--project', 'initech', '--key', foreign.key.id]), /is not an active API key of project initech/);
    expectOneLineError(await cli(['portal', 'link']), /--project is required/, 2);
    const usage = await cli(['portal']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^usage:\n {2}portal link --project <id>/);
  });
});
