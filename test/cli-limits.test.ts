import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCli as runCliInProcess } from '../src/cli/commands.ts';
import { createApiKey } from '../src/db/queries/api-keys.ts';
import { recordEvent } from '../src/db/queries/events.ts';
import { listLimits, setProjectLimits } from '../src/db/queries/limits.ts';
import { insertWebhook } from '../src/db/queries/webhooks.ts';
import { acquireSendPlaces, type FlowLimits } from '../src/flow-control/places.ts';
import { generateEncryptionKey, SecretBox } from '../src/secrets/crypto.ts';
import { runCli } from './support/cli.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from './support/database.ts';
import { docauthData } from './support/event-data.ts';

/*
 * The operator's per-project and per-destination send limits, set with the CLI in the database
 * the replicas share, and applied by the next request for a place.
 */

let database: SharedTestDatabase;
const box = new SecretBox(generateEncryptionKey());
const defaults: FlowLimits = { webhookMaxInFlight: 10, projectMaxInFlight: 100, destinationMaxInFlight: 200, holdMs: 60_000, reserveMs: 60_000 };
const cli = (args: string[]) => runCli(args, database.cliEnv);

/**
 * Runs the CLI in this process on the test's database, and returns its exit code and what it
 * printed: for command lines it refuses, a second or more sooner than a child process each.
 */
async function inProcess(args: string[]) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void stdout.push(String(line)));
  const error = vi.spyOn(console, 'error').mockImplementation((line: unknown) => void stderr.push(String(line)));
  vi.stubEnv('DATABASE_URL', database.url);
  try {
    return { code: await runCliInProcess(args), stdout: stdout.join('\n'), stderr: stderr.join('\n') };
  } finally {
    vi.unstubAllEnvs();
    log.mockRestore();
    error.mockRestore();
  }
}

beforeAll(async () => {
  database = await openSharedTestDatabase();
});
afterAll(async () => {
  await database?.close();
});

/** `count` deliveries to a new webhook of `projectId` at `url`. */
async function deliveriesTo(projectId: string, url: string, count: number): Promise<string[]> {
  const { key } = await createApiKey(database.db, { projectId, services: ['webhooks'] });
  const webhook = await insertWebhook(database.db, box, projectId, { apiKeyId: key.id, url, events: ['docauth.completed'], headers: {}, secret: 'whsec_test' });
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const recorded = await recordEvent(database.db, box, { projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData(), onlyWebhookId: webhook.id });
    ids.push(recorded.deliveries[0]!.deliveryId);
  }
  return ids;
}

/** The answers to the deliveries' requests for places, asked one after another. */
async function decisions(ids: string[]): Promise<string[]> {
  const answers: string[] = [];
  for (const id of ids) answers.push((await acquireSendPlaces(database.db, id, `cli/${id}`, defaults)).decision);
  return answers;
}

describe('limits, the operator command', { timeout: 120_000 }, () => {
  it("sets a project's and a destination's own limits, shows them, and the next requests for places obey them", async () => {
    const project = await cli(['limits', 'set', '--project', 'acme', '--max-in-flight', '2', '--json']);
    expect(project.stderr).toBe('');
    expect(JSON.parse(project.stdout)).toMatchObject({ scope: 'project', name: 'acme', max_in_flight: 2 });
    // A destination as host, host:port or URL is the host and port that webhook URLs name.
    const destination = await cli(['limits', 'set', '--destination', 'Hooks.Example.COM', '--max-in-flight', '1', '--json']);
    expect(JSON.parse(destination.stdout)).toMatchObject({ scope: 'destination', name: 'hooks.example.com:443', max_in_flight: 1 });
    const asUrl = await cli(['limits', 'set', '--destination', 'https://hooks.example.com:443/any/path', '--max-in-flight', '1', '--json']);
    expect(JSON.parse(asUrl.stdout)).toMatchObject({ scope: 'destination', name: 'hooks.example.com:443', max_in_flight: 1 });

    const shown = JSON.parse((await cli(['limits', 'show', '--json'])).stdout);
    expect(shown.defaults).toMatchObject({ project_max_in_flight: 100, destination_max_in_flight: 200 });
    expect(shown.overrides).toEqual([
      expect.objectContaining({ scope: 'project', name: 'acme', max_in_flight: 2 }),
      expect.objectContaining({ scope: 'destination', name: 'hooks.example.com:443', max_in_flight: 1 }),
    ]);

    expect(await decisions(await deliveriesTo('acme', 'https://127.0.0.1:1/acme', 3))).toEqual(['granted', 'granted', 'wait_turn']);
    expect(await decisions(await deliveriesTo('other', 'https://hooks.example.com:443/other', 2))).toEqual(['granted', 'wait_turn']);

    // The publish quota and the webhooks of a project; the limits set before are kept.
    const quota = await cli(['limits', 'set', '--project', 'acme', '--publish-rate', '2.5', '--publish-burst', '10', '--max-webhooks', '50', '--json']);
    expect(JSON.parse(quota.stdout)).toMatchObject({ scope: 'project', name: 'acme', max_in_flight: 2, publish_rate: 2.5, publish_burst: 10, max_webhooks: 50, recovery_rate: null });
    // A raised quota says that the recovery's pace is not raised with it; the project's own pace is set apart.
    const raised = await cli(['limits', 'set', '--project', 'acme', '--publish-rate', '50']);
    expect(raised.code).toBe(0);
    expect(raised.stdout).toMatch(/still recover at PROJECT_RECOVERY_RATE \(3\/s, 0: not paced\); --recovery-rate sets its own/);
    const recovery = await cli(['limits', 'set', '--project', 'acme', '--recovery-rate', '15']);
    expect(recovery.stdout.trim()).toBe('project acme: max_in_flight=2, publish_rate=50, publish_burst=10, max_webhooks=50, recovery_rate=15 (the rest as configured).');
    const unpaced = await cli(['limits', 'set', '--project', 'calm', '--recovery-rate', '0', '--json']);
    expect(JSON.parse(unpaced.stdout)).toMatchObject({ name: 'calm', recovery_rate: 0, publish_rate: null });
    expect(JSON.parse((await cli(['limits', 'show', '--json'])).stdout).defaults).toMatchObject({ project_recovery_rate: 3 });
    await cli(['limits', 'reset', '--project', 'calm']);

    const reset = await cli(['limits', 'reset', '--project', 'acme']);
    expect(reset.code).toBe(0);
    expect(await decisions(await deliveriesTo('acme', 'https://127.0.0.1:1/acme-again', 2))).toEqual(['granted', 'granted']);
  });

  it('refuses a limit given to reset, with a usage error, and keeps the limits', async () => {
    await setProjectLimits(database.db, 'kept', { maxInFlight: 3, publishRate: 4 });
    const reset = await cli(['limits', 'reset', '--project', 'kept', '--max-in-flight', '5']);
    expect(reset.code).toBe(2);
    expect(reset.stderr).toMatch(/^error: limits reset takes no limit \(--max-in-flight\)/);
    expect(await listLimits(database.db)).toContainEqual(expect.objectContaining({ scope: 'project', name: 'kept', maxInFlight: 3, publishRate: 4 }));
  });

  it('refuses what it cannot set, with a usage error, and says when there is nothing to reset', async () => {
    for (const args of [
      ['limits', 'set', '--project', 'acme'],
      ['limits', 'set', '--project', 'acme', '--max-in-flight', '0'],
      ['limits', 'set', '--project', 'acme', '--max-in-flight', '2.5'],
      ['limits', 'set', '--project', 'acme', '--destination', 'x.example', '--max-in-flight', '2'],
      ['limits', 'set', '--max-in-flight', '2'],
      ['limits', 'set', '--destination', '/no-host', '--max-in-flight', '2'],
      ['limits', 'set', '--destination', 'x.example', '--publish-rate', '5'],
      ['limits', 'set', '--project', 'acme', '--publish-rate', '0'],
      ['limits', 'set', '--project', 'acme', '--max-webhooks', 'many'],
      ['limits', 'set', '--project', 'acme', '--recovery-rate', '0.05'],
      ['limits', 'set', '--project', 'acme', '--recovery-rate', '1001'],
      ['limits', 'set', '--project', 'acme', '--recovery-rate', '-1'],
      ['limits', 'set', '--destination', 'x.example', '--recovery-rate', '5'],
      // A port that is not a whole number from 1 to 65535, or a malformed host: no webhook URL names it.
      ['limits', 'set', '--destination', 'ports.example.com:abc', '--max-in-flight', '1'],
      ['limits', 'set', '--destination', 'ports.example.com:8o80', '--max-in-flight', '1'],
      ['limits', 'set', '--destination', 'ports.example.com:70000', '--max-in-flight', '1'],
      ['limits', 'set', '--destination', 'ports.example.com:0', '--max-in-flight', '1'],
      ['limits', 'set', '--destination', 'ports example.com', '--max-in-flight', '1'],
    ]) {
      const result = await inProcess(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
    }
    expect((await listLimits(database.db)).filter((stored) => stored.name.startsWith('ports'))).toEqual([]);
    const nothing = await cli(['limits', 'reset', '--destination', 'never.example']);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toMatch(/destination never\.example:443 has no limits of its own/);
  });
});
