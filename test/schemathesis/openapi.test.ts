import type { ServerType } from '@hono/node-server';
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSchemathesis } from '../../scripts/schemathesis.mjs';
import { OPENAPI_PATH } from '../../src/app.ts';
import { startHttpServer } from '../../src/http-server.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/**
 * Schemathesis, a property-based tester, against the service assembled from real parts and
 * served on a real port: it reads the served OpenAPI document, generates valid and invalid
 * requests for every operation (examples, coverage, fuzzing), then walks the document's links
 * from created and listed ids (create -> get/update/rotate/deliveries/delete, and on) in its
 * stateful phase. The checks are in schemathesis.toml, the hooks in hooks.py.
 *
 * No delivery worker runs: deliveries (test events, bulk retries) are stored and their
 * workflows started in Temporal, but nothing is sent, since the webhook URLs are whatever the
 * tester generates (the document's https://example.com/webhooks, or any other public name).
 *
 * Schemathesis ends its stateful phase, reporting success, as soon as a replayed scenario goes
 * differently from its first run, which a server with state across scenarios causes: a second
 * bulk retry of a webhook is refused (409) while the first one runs, and with no worker here it
 * runs on. When that leaves a linked operation unreached, the test runs the stateful phase alone
 * again, with the next seeds, up to STATEFUL_RERUNS times; every run must pass.
 *
 * The seed is random; SCHEMATHESIS_SEED=<n> repeats a run.
 */

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CONFIG_FILE = path.join(HERE, 'schemathesis.toml');
const HOOKS_FILE = path.join(HERE, 'hooks.py');
/** Far above the one to two minutes a run takes; a hung run is killed and reported. */
const RUN_TIMEOUT_MS = 8 * 60_000;

/** Stateful-only runs allowed after the full run, while a linked operation is still unreached. */
const STATEFUL_RERUNS = 3;
/** Operations the stateful phase must reach through a link from a webhook just created, with a 2xx answer. */
const LINKED_OPERATIONS = ['getWebhook', 'updateWebhook', 'deleteWebhook', 'rotateWebhookSecret', 'listDeliveries'];

interface RunReport {
  exit_code: number;
  seed: number;
  running_time: number;
  operations: { total: number; selected: number; tested: number; errored: number };
  phases: Record<string, { status: string; skip_reason: string | null }>;
  test_cases: { generated: number; with_failures: number; errored: number };
  failures: unknown[];
  errors: unknown[];
}

/** One request of the stateful phase, as the NDJSON report records it. */
interface StatefulCall {
  method: string;
  path: string;
  status: number | undefined;
  /** The link that produced it, `source -> [status] Name -> target`; undefined for a chain's first call. */
  link: string | undefined;
}

let h: Harness;
let server: ServerType;
let origin: string;
let workDir: string;
let schemathesis: string;
let operationIds: Map<string, string>;

beforeAll(async () => {
  schemathesis = ensureSchemathesis();
  h = await startHarness();
  server = await startHttpServer(h.app.fetch, { port: 0, host: '127.0.0.1' });
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('no server address');
  origin = `http://127.0.0.1:${address.port}`;
  workDir = await mkdtemp(path.join(os.tmpdir(), 'schemathesis-'));
  const document = (await h.request('GET', OPENAPI_PATH)).body as { paths: Record<string, Record<string, { operationId: string }>> };
  operationIds = new Map(
    Object.entries(document.paths).flatMap(([route, operations]) =>
      Object.entries(operations).map(([method, operation]) => [`${method.toUpperCase()} ${route}`, operation.operationId] as const),
    ),
  );
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await h?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** Runs `schemathesis run` without blocking this process, which serves the API it calls. */
function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(schemathesis, args, { cwd: workDir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** The stateful phase's requests, from the NDJSON event stream. */
async function statefulCalls(file: string): Promise<StatefulCall[]> {
  const calls: StatefulCall[] = [];
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    if (!line.includes('"ScenarioFinished"')) continue;
    const finished = JSON.parse(line).ScenarioFinished as {
      phase: string;
      recorder?: {
        cases?: Record<string, { value: { method: string; path: string }; transition?: { id: string } }>;
        interactions?: Record<string, { response?: { status_code: number } | null }>;
      };
    };
    if (finished.phase !== 'stateful' || !finished.recorder?.cases) continue;
    for (const [id, recorded] of Object.entries(finished.recorder.cases)) {
      calls.push({
        method: recorded.value.method,
        path: recorded.value.path,
        status: finished.recorder.interactions?.[id]?.response?.status_code,
        link: recorded.transition?.id,
      });
    }
  }
  return calls;
}

const ALL_PHASES = ['examples', 'coverage', 'fuzzing', 'stateful'];

/** One Schemathesis run, checked to have found nothing. */
interface CheckedRun {
  seed: number;
  seconds: number;
  report: RunReport;
  calls: StatefulCall[];
}

/** Runs Schemathesis on the given phases and expects no failure, no error and each of those phases passed. */
async function runChecked(key: { id: string; token: string }, seed: number, phases: string[]): Promise<CheckedRun> {
  const ndjson = path.join(workDir, `events-${seed}.ndjson`);
  const json = path.join(workDir, `report-${seed}.json`);
  const started = Date.now();
  const { code, output } = await run(
    [
      '--config-file', CONFIG_FILE,
      'run', `${origin}${OPENAPI_PATH}`,
      '--seed', String(seed),
      '--phases', phases.join(','),
      '--report', 'ndjson,json',
      '--report-ndjson-path', ndjson,
      '--report-json-path', json,
      '--no-color',
    ],
    {
      SCHEMATHESIS_HOOKS: HOOKS_FILE,
      SCHEMATHESIS_API_TOKEN: key.token,
      SCHEMATHESIS_API_KEY_ID: key.id,
      SCHEMATHESIS_PRODUCER_TOKEN: h.producerToken,
    },
  );
  const seconds = Math.round((Date.now() - started) / 1000);
  const context = `seed ${seed}, phases ${phases.join(',')} (repeat with SCHEMATHESIS_SEED=${seed}); Schemathesis said:\n${output.slice(-20_000)}`;
  expect(code, context).toBe(0);

  const report = JSON.parse(await readFile(json, 'utf8')) as RunReport;
  expect(report.exit_code, context).toBe(0);
  expect({ failures: report.failures, errors: report.errors }, context).toEqual({ failures: [], errors: [] });
  const statuses = Object.fromEntries(phases.map((phase) => [phase, report.phases[phase]?.status]));
  expect(statuses, context).toEqual(Object.fromEntries(phases.map((phase) => [phase, 'success'])));
  return { seed, seconds, report, calls: await statefulCalls(ndjson) };
}

describe('Schemathesis against the served OpenAPI document', () => {
  it('finds no failure in any phase, and its stateful phase walks from created webhooks to the operations on them', async () => {
    const key = await h.createKey();
    const seedFromEnv = process.env['SCHEMATHESIS_SEED'];
    const seed = seedFromEnv ? Number(seedFromEnv) : randomInt(2 ** 31);
    const operationOf = (methodAndPath: string) => operationIds.get(methodAndPath) ?? methodAndPath;
    const succeeded = (call: StatefulCall) => call.status !== undefined && call.status >= 200 && call.status < 300;
    // A link's id reads `POST /api-gateway/v2/webhooks -> [201] GetWebhook -> GET /api-gateway/v2/webhooks/{id}`.
    const fromCreate = new Map<string, number>();
    const countFromCreate = (calls: StatefulCall[]) => {
      for (const call of calls) {
        if (!call.link || !succeeded(call) || operationOf(call.link.split(' -> ')[0]!) !== 'createWebhook') continue;
        const operation = operationOf(`${call.method} ${call.path}`);
        fromCreate.set(operation, (fromCreate.get(operation) ?? 0) + 1);
      }
    };
    const unreached = () => LINKED_OPERATIONS.filter((operation) => !fromCreate.has(operation));

    const runs = [await runChecked(key, seed, ALL_PHASES)];
    expect(runs[0]!.report.operations.tested, `seed ${seed}: operations tested`).toBe(runs[0]!.report.operations.selected);
    countFromCreate(runs[0]!.calls);
    while (unreached().length > 0 && runs.length <= STATEFUL_RERUNS) {
      const rerun = await runChecked(key, seed + runs.length, ['stateful']);
      countFromCreate(rerun.calls);
      runs.push(rerun);
    }
    expect(unreached(), `seeds ${runs.map((r) => r.seed).join(', ')}: the stateful phase never reached these through a link from createWebhook`).toEqual([]);

    const calls = runs.flatMap((r) => r.calls);
    const links = new Set(calls.flatMap((call) => (call.link ? [call.link] : [])));
    const successfulLinks = new Set(calls.flatMap((call) => (call.link && succeeded(call) ? [call.link] : [])));
    console.log(
      `Schemathesis (seed ${seed}, ${runs[0]!.seconds} s): ${runs[0]!.report.test_cases.generated} test cases, ` +
        `${runs[0]!.report.operations.tested}/${runs[0]!.report.operations.total} operations; ` +
        `stateful-only reruns: ${runs.length - 1}${runs.length > 1 ? ` (seeds ${runs.slice(1).map((r) => `${r.seed}, ${r.seconds} s`).join('; ')})` : ''}; ` +
        `stateful phase: ${calls.length} requests, ${links.size} distinct links followed, ${successfulLinks.size} of them answered 2xx; ` +
        `2xx answers through a link from createWebhook: ${[...fromCreate].sort().map(([operation, count]) => `${operation} ${count}`).join(', ')}`,
    );
  });
});
