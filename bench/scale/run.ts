/**
 * The scale benchmark: `npm run bench:scale -- [options]` (see --help and docs/performance.md).
 *
 * Fills a database with generated traffic (bench/scale/generate.ts; kept for the next run),
 * then measures on it: bytes per delivery on disk, latency percentiles of the API's hot
 * requests with the EXPLAIN of each statement they send, and the retention sweep's deletion
 * rate with the latency of publishing and listing while it runs.
 */
import { Client, Connection } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { parseConfig } from '../../src/config.ts';
import { createApp } from '../../src/app.ts';
import { openDatabase, queryRows, type Database } from '../../src/db/client.ts';
import { spawnEmbeddedPostgres } from '../../src/local/embedded-database.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { sweepAll, sweepCutoffs, SWEEP_REST_RATIO } from '../../src/retention/sweep.ts';
import { generateEncryptionKey, randomToken, SecretBox } from '../../src/secrets/crypto.ts';
import { startDevServer } from '../../src/local/dev-server.ts';
import { DeliveryScheduler } from '../../src/temporal/scheduler.ts';
import { docauthData } from '../../test/support/event-data.ts';
import { freePort } from '../lib/stack.ts';
import { percentiles } from '../lib/stats.ts';
import { measureTargets, sampleData, type Requester, type Target } from './api-latency.ts';
import { FULL_SHAPE, generatedProjectId, generateHistory, type HistoryShape } from './generate.ts';
import { measureStorage } from './storage.ts';

const SHAPES: Record<string, HistoryShape> = {
  full: FULL_SHAPE,
  pglite: { projects: 10, webhooksPerProject: 100, deliveries: 300_000, fanOut: 10, spanDays: 60 },
  quick: { projects: 4, webhooksPerProject: 25, deliveries: 20_000, fanOut: 5, spanDays: 60 },
};

const HELP = `npm run bench:scale -- [options]

  --shape <full|pglite|quick>  full: ${FULL_SHAPE.deliveries.toLocaleString('en')} deliveries, ${FULL_SHAPE.projects * FULL_SHAPE.webhooksPerProject} webhooks of ${FULL_SHAPE.projects} projects;
                               pglite: 300,000 deliveries, 1,000 webhooks of 10 projects; quick: 20,000 (CI smoke)
                               [full with DATABASE_URL, pglite without]
  --quick                      --shape quick --requests 20
  --requests <n>               measured calls per request kind [200]
  --sweep-share <0..1>         the sweep deletes the oldest settled deliveries: this share of their time span [0.1]; 0: no sweep
  --sweep-rest <ratio>         the sweep rests this many times each batch's duration after it [${SWEEP_REST_RATIO}, as the service]
  --regenerate                 empty the tables and generate again (else data of the same shape is reused)
  --data-dir <dir>             PGlite folder when DATABASE_URL is unset [.data/scale-pglite-<shape>]
  --out <file.json>            [bench/results/<time>-scale-<shape>.json]

DATABASE_URL: the PostgreSQL database to fill and measure (a database of its own: the tables are
emptied by --regenerate). Unset: an embedded PGlite served as \`npm start\` serves it.
Exit status 0; 4 when a hot statement scans a large table sequentially; 1 on an error.`;

const { values: args } = parseArgs({
  options: {
    shape: { type: 'string' },
    quick: { type: 'boolean', default: false },
    requests: { type: 'string' },
    'sweep-share': { type: 'string', default: '0.1' },
    'sweep-rest': { type: 'string', default: String(SWEEP_REST_RATIO) },
    regenerate: { type: 'boolean', default: false },
    'data-dir': { type: 'string' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  console.log(HELP);
  process.exit(0);
}
const databaseUrl = process.env['DATABASE_URL'];
const shapeName = args.shape ?? (args.quick ? 'quick' : databaseUrl ? 'full' : 'pglite');
const shape = SHAPES[shapeName];
const requests = Number(args.requests ?? (args.quick ? 20 : 200));
const sweepShare = Number(args['sweep-share']);
const sweepRest = Number(args['sweep-rest']);
if (!shape || !Number.isInteger(requests) || requests < 1 || !(sweepShare >= 0 && sweepShare < 1) || !(sweepRest >= 0)) {
  console.error(`bad options\n\n${HELP}`);
  process.exit(2);
}

const log = (message: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${message}`);

/** Generates the shape's data unless the database already holds exactly it. */
async function ensureData(db: Database): Promise<{ generated: boolean; seconds?: number }> {
  const [counts] = await queryRows<{ webhooks: number; deliveries: number }>(
    db,
    sql`select (select count(*)::int from webhooks where project_id like 'prj_gen_%') as webhooks,
               (select count(*)::int from deliveries) as deliveries`,
  );
  const expectedWebhooks = shape!.projects * shape!.webhooksPerProject;
  if (!args.regenerate && counts!.webhooks === expectedWebhooks && counts!.deliveries > 0) {
    log(`reusing ${counts!.deliveries.toLocaleString('en')} deliveries of ${expectedWebhooks} generated webhooks`);
    return { generated: false };
  }
  if (counts!.webhooks + counts!.deliveries > 0) {
    if (!args.regenerate) throw new Error('the database holds other data: use --regenerate (it empties the tables) or another database');
    // cascade: also the tables that refer to these (bulk operations).
    await db.execute(sql`truncate delivery_attempts, deliveries, events, webhooks, api_keys cascade`);
  }
  log(`generating ${shape!.deliveries.toLocaleString('en')} deliveries …`);
  let reported = 0;
  const generated = await generateHistory(db, shape!, {
    onProgress: (done) => {
      if (done - reported >= 0.1 || done === 1) log(`  ${Math.round((reported = done) * 100)}%`);
    },
  });
  log(`generated ${generated.deliveries.toLocaleString('en')} deliveries, ${generated.attempts.toLocaleString('en')} attempts, ${generated.events.toLocaleString('en')} events in ${generated.seconds.toFixed(0)} s`);
  return { generated: true, seconds: generated.seconds };
}

const cleanups: Array<() => Promise<void>> = [];
try {
  let url = databaseUrl;
  if (!url) {
    const embedded = await spawnEmbeddedPostgres(path.resolve(args['data-dir'] ?? `.data/scale-pglite-${shapeName}`), await freePort());
    cleanups.unshift(() => embedded.stop());
    url = embedded.url;
  }
  let captured: Array<{ query: string; params: unknown[] }> | undefined;
  const handle = await openDatabase(
    { kind: 'postgres', url, poolMax: databaseUrl ? 10 : 1 },
    { logQuery: (query, params) => captured?.push({ query, params }) },
  );
  cleanups.unshift(() => handle.close());
  const raw = postgres(url, { max: 1, onnotice: () => {} });
  cleanups.unshift(() => raw.end({ timeout: 5 }));
  const migrateStarted = Date.now();
  await handle.migrate();
  const migrateSeconds = (Date.now() - migrateStarted) / 1000;
  if (migrateSeconds > 1) log(`migrations applied in ${migrateSeconds.toFixed(1)} s`);
  const data = { ...(await ensureData(handle.db)), migrate_seconds: migrateSeconds };
  const storage = await measureStorage(raw);
  log(`on disk: ${storage.bytes_per_delivery} bytes per delivery (with its attempts and its share of the event)`);

  const temporal = await startDevServer({ cliPath: process.env['TEMPORAL_CLI_PATH'], stateDir: undefined, port: await freePort(), uiPort: undefined, namespace: 'default' });
  cleanups.unshift(() => temporal.stop());
  const connection = await Connection.connect({ address: temporal.address });
  cleanups.unshift(() => connection.close());
  const client = new Client({ connection });
  const app = createApp({
    db: handle.db,
    temporal: client,
    scheduler: new DeliveryScheduler(client, 'scale-bench'),
    secretBox: new SecretBox(generateEncryptionKey()),
    // The scale run measures the API's statements, not the publish quota: no project is held back.
    admission: { ...parseConfig({}).admission, publish: { rate: 100_000, burst: 1_000_000 } },
    logger: createLogger('silent'),
    metrics: createMetrics(),
  });
  const request: Requester = async (method, requestPath, token, body) => {
    const response = await app.request(requestPath, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body !== undefined && { 'Content-Type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    await response.arrayBuffer();
    return response.status;
  };

  // The largest project's holder, and a project of its own for publishing (one webhook, so each publish starts one workflow).
  const projectId = generatedProjectId(0);
  const { token } = await createApiKey(handle.db, { projectId, services: ['webhooks'] });
  const publisher = await createApiKey(handle.db, { projectId: `prj_scale_bench_${randomToken(4)}`, services: ['webhooks'] });
  await request('POST', '/api-gateway/v2/webhooks', publisher.token, {
    api_key_id: publisher.key.id,
    url: 'https://hooks.example.com/scale-bench',
    events: ['docauth.completed'],
  });
  const producer = await createApiKey(handle.db, { projectId: publisher.key.projectId, services: ['events'] });
  const sample = await sampleData(handle.db, projectId);
  log(`largest webhook ${sample.largest.id}: ${sample.largest.deliveries.toLocaleString('en')} deliveries; ordinary ${sample.ordinary.id}: ${sample.ordinary.deliveries.toLocaleString('en')}`);
  const base = '/api-gateway/v2/webhooks';
  const pick = <T>(list: T[], i: number) => list[i % list.length]!;
  const get = (path: string) => ({ method: 'GET', path, token });
  const publish = (): Target['next'] => () => ({
    method: 'POST',
    path: '/internal/v1/events',
    token: producer.token,
    body: { project_id: publisher.key.projectId, event: 'docauth.completed', data: docauthData() },
  });
  const targets: Target[] = [
    { name: 'list webhooks', expectStatus: 200, next: () => get(base) },
    { name: 'get webhook', expectStatus: 200, next: (i) => get(`${base}/${pick(sample.webhookIds, i * 7)}`) },
    { name: 'list deliveries, first page (largest webhook)', expectStatus: 200, next: () => get(`${base}/${sample.largest.id}/deliveries`) },
    { name: 'list deliveries, first page (ordinary webhook)', expectStatus: 200, next: () => get(`${base}/${sample.ordinary.id}/deliveries`) },
    {
      name: 'list deliveries, deep cursor page (largest webhook)',
      expectStatus: 200,
      next: (i) => get(`${base}/${sample.largest.id}/deliveries?starting_after=${pick(sample.deepCursors, i)}`),
    },
    { name: 'list deliveries, status=dead_letter (largest webhook)', expectStatus: 200, next: () => get(`${base}/${sample.largest.id}/deliveries?status=dead_letter`) },
    {
      name: 'list deliveries, status=failed, deep cursor (largest webhook)',
      expectStatus: 200,
      next: (i) => get(`${base}/${sample.largest.id}/deliveries?status=failed&starting_after=${pick(sample.deepCursors, i)}`),
    },
    {
      name: 'list deliveries, event=docauth.completed (largest webhook)',
      expectStatus: 200,
      next: () => get(`${base}/${sample.largest.id}/deliveries?event=docauth.completed`),
    },
    {
      name: 'get delivery',
      expectStatus: 200,
      next: (i) => {
        const delivery = pick(sample.deliveries, i);
        return get(`${base}/${delivery.webhook_id}/deliveries/${delivery.id}`);
      },
    },
    {
      name: 'get attempts',
      expectStatus: 200,
      next: (i) => {
        const delivery = pick(sample.deliveries, i);
        return get(`${base}/${delivery.webhook_id}/deliveries/${delivery.id}/attempts`);
      },
    },
    { name: 'publish (1 delivery)', expectStatus: 202, next: publish() },
  ];
  log(`measuring ${targets.length} request kinds, ${requests} calls each …`);
  const capture = {
    start: () => void (captured = []),
    stop: () => {
      const statements = captured ?? [];
      captured = undefined;
      return statements;
    },
  };
  const api = await measureTargets(targets, requests, request, capture, raw);
  for (const result of api) {
    log(`  ${result.name}: p50 ${result.latency_ms.p50} ms, p99 ${result.latency_ms.p99} ms; ${result.plans.map((plan) => plan.scans.join(' > ')).join(' | ')}`);
  }

  let sweep: Record<string, unknown> | undefined;
  if (sweepShare > 0) sweep = await measureSweep(handle.db, raw, request, targets);

  const result = {
    kind: 'scale',
    at: new Date().toISOString(),
    database: databaseUrl ? 'postgres' : 'pglite (embedded, served on a loopback port)',
    shape: { name: shapeName, ...shape },
    data,
    storage,
    api,
    sweep,
    load_average: os.loadavg(),
  };
  const out = args.out ?? `bench/results/${new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19)}-scale-${shapeName}.json`;
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  log(`results: ${out}`);
  const seqScans = api.flatMap((target) => target.plans.filter((plan) => !plan.indexPath).map((plan) => `${target.name}: ${plan.scans.join(' > ')}`));
  for (const finding of seqScans) console.error(`sequential scan of a large table: ${finding}`);
  process.exitCode = seqScans.length > 0 ? 4 : 0;
} catch (error) {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
} finally {
  for (const cleanup of cleanups) await cleanup().catch(() => {});
}

/**
 * Sweeps the settled deliveries of the oldest `sweepShare` of their time span, while
 * publishing and listing run one after the other in a loop; their latency then against the
 * same loop before the sweep.
 */
async function measureSweep(db: Database, raw: postgres.Sql, request: Requester, targets: Target[]) {
  // The span of what a sweep can delete (settled deliveries), so that a second run finds work too.
  const [span] = await raw<{ oldest: Date; newest: Date }[]>`
    select min(updated_at) as oldest, max(updated_at) as newest from deliveries where status in ('delivered', 'dead_letter')`;
  const cutoff = span!.oldest.getTime() + sweepShare * (span!.newest.getTime() - span!.oldest.getTime());
  const olderThanMs = Date.now() - cutoff;
  const counts = async () => (await raw<{ attempts: number }[]>`select count(*)::int as attempts from delivery_attempts`)[0]!.attempts;
  const loopTargets = targets.filter((target) => target.name === 'publish (1 delivery)' || target.name === 'list deliveries, first page (largest webhook)');
  const loop = async (until: () => boolean) => {
    const latencies: Record<string, number[]> = Object.fromEntries(loopTargets.map((target) => [target.name, []]));
    for (let i = 0; !until(); i += 1) {
      for (const target of loopTargets) {
        const { method, path: requestPath, body, token } = target.next(i);
        const started = performance.now();
        await request(method, requestPath, token, body);
        latencies[target.name]!.push(performance.now() - started);
      }
    }
    return Object.fromEntries(Object.entries(latencies).map(([name, values]) => [name, { calls: values.length, ...percentiles(values) }]));
  };
  const baselineEnd = Date.now() + 10_000;
  const before = await loop(() => Date.now() > baselineEnd);
  const attemptsBefore = await counts();
  log(`sweeping what is older than ${(olderThanMs / 86_400_000).toFixed(1)} days (the oldest ${sweepShare * 100}% of the span) …`);
  let sweeping = true;
  const started = Date.now();
  let batches = 0;
  const sweepDone = sweepAll(db, sweepCutoffs(new Date(), olderThanMs), { restRatio: sweepRest, onBatch: () => void (batches += 1) }).finally(() => (sweeping = false));
  const during = await loop(() => !sweeping);
  const deleted = await sweepDone;
  const seconds = (Date.now() - started) / 1000;
  const attemptsDeleted = attemptsBefore - (await counts());
  log(`swept ${deleted.deliveries.toLocaleString('en')} deliveries, ${attemptsDeleted.toLocaleString('en')} attempts, ${deleted.events.toLocaleString('en')} events in ${seconds.toFixed(1)} s (${Math.round(deleted.deliveries / seconds).toLocaleString('en')} deliveries/s)`);
  return {
    older_than_days: Math.round((olderThanMs / 86_400_000) * 10) / 10,
    rest_ratio: sweepRest,
    deleted: { ...deleted, attempts: attemptsDeleted },
    batches,
    seconds,
    deliveries_per_second: Math.round(deleted.deliveries / seconds),
    latency_ms: { before, during },
  };
}
