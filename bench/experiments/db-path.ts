/**
 * Experiment: the database work of one delivery, alone (no Temporal, no HTTP), with the
 * service's own queries in the service's order: recordEvent, markEventDispatched,
 * acquireSendPlaces, startAttempt, finishAttempt, releaseSendPlaces (7 round trips). The embedded database runs as the service runs
 * it, in a process of its own (spawnEmbeddedPostgres) behind the loopback socket, or Postgres
 * at --postgres-url. It reports deliveries per second of the database path alone and CPU
 * milliseconds per delivery of this process (the client side) and of the database process.
 *
 *   npx tsx bench/experiments/db-path.ts [--deliveries 2000] [--concurrency 16] [--webhooks 1]
 *                                        [--postgres-url postgres://...]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openDatabase } from '../../src/db/client.ts';
import { spawnEmbeddedPostgres } from '../../src/local/embedded-database.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { finishAttempt, startAttempt } from '../../src/db/queries/deliveries.ts';
import { acquireSendPlaces, releaseSendPlaces, type FlowLimits } from '../../src/flow-control/places.ts';

/** The service's default limits (ENDPOINT_, PROJECT_ and DESTINATION_MAX_IN_FLIGHT, a 30 s send). */
const FLOW_LIMITS: FlowLimits = { webhookMaxInFlight: 10, projectMaxInFlight: 100, destinationMaxInFlight: 200, holdMs: 60_000, reserveMs: 60_000 };
import { markEventDispatched, recordEvent } from '../../src/db/queries/events.ts';
import { insertWebhook } from '../../src/db/queries/webhooks.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { docauthData } from '../../test/support/event-data.ts';
import { freePort } from '../lib/stack.ts';
import { readStat } from '../lib/procstat.ts';
import { percentiles, round } from '../lib/stats.ts';

const { values } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '16' },
    webhooks: { type: 'string', default: '1' },
    'postgres-url': { type: 'string' },
    'pool-max': { type: 'string', default: '10' },
  },
});
const total = Number(values.deliveries);
const concurrency = Number(values.concurrency);
const webhookCount = Number(values.webhooks);

const dir = mkdtempSync(path.join(os.tmpdir(), 'db-path-'));
let stopEmbedded: (() => Promise<void>) | undefined;
let databasePid: number | undefined;
let url = values['postgres-url'];
if (!url) {
  const embedded = await spawnEmbeddedPostgres(path.join(dir, 'pglite'), await freePort());
  stopEmbedded = () => embedded.stop();
  databasePid = embedded.pid;
  url = embedded.url;
}
const handle = await openDatabase({ kind: 'postgres', url, poolMax: Number(values['pool-max']) });
await handle.migrate();
const db = handle.db;
const box = new SecretBox(generateEncryptionKey());
const projectId = `dbpath-${Date.now()}`;
const { key } = await createApiKey(db, { projectId, services: ['webhooks'] });
for (let i = 0; i < webhookCount; i += 1) {
  await insertWebhook(db, box, projectId, {
    apiKeyId: key.id,
    url: `https://127.0.0.1:1/hooks/${i}`,
    events: ['docauth.completed'],
    headers: { 'X-Customer-Tag': 'bench' },
    secret: 'whsec_x',
  });
}

/** The service's queries, in the service's order. */
async function deliveryPath(seq: number): Promise<void> {
  const recorded = await recordEvent(db, box, {
    projectId,
    producerEventId: `evt-${seq}`,
    event: 'docauth.completed',
    occurredAt: new Date(),
    payload: docauthData({ request_id: `req_bench_${seq}` }),
  });
  await markEventDispatched(db, recorded.event.id);
  for (const target of recorded.deliveries) {
    const places = await acquireSendPlaces(db, target.deliveryId, 'bench', FLOW_LIMITS);
    if (places.decision !== 'granted') throw new Error(`no place: ${places.decision}`);
    const started = await startAttempt(db, box, target.deliveryId, new Date());
    if (!started?.attempt) throw new Error('no attempt');
    await finishAttempt(db, {
      attemptId: started.attempt.attemptId,
      deliveryId: target.deliveryId,
      webhookId: started.webhook.id,
      outcome: 'succeeded',
      statusCode: 200,
      durationMs: 3,
      finishedAt: new Date(),
      nextStatus: { status: 'dead_letter' },
    }, 5);
    await releaseSendPlaces(db, target.deliveryId, 'bench', FLOW_LIMITS);
  }
}

/** CPU seconds of the embedded database process so far (0 with --postgres-url). */
const databaseCpu = () => (databasePid ? (readStat(databasePid)?.cpuSeconds ?? 0) : 0);

async function run(fn: (seq: number) => Promise<void>) {
  // Warm-up (JIT, plans), not measured.
  for (let i = 0; i < 50; i += 1) await fn(1_000_000 + i);
  const durations: number[] = [];
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const databaseBefore = databaseCpu();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const seq = next++;
        const t = performance.now();
        await fn(seq);
        durations.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const databaseMs = (databaseCpu() - databaseBefore) * 1000;
  const deliveries = total * webhookCount;
  return {
    events: total,
    deliveries,
    concurrency,
    seconds: round(seconds, 2),
    deliveries_per_s: round(deliveries / seconds, 1),
    cpu_ms_per_delivery: {
      client_process: round((cpu.user + cpu.system) / 1000 / deliveries, 2),
      database_process: round(databaseMs / deliveries, 2),
    },
    event_path_ms: percentiles(durations),
  };
}

let result;
try {
  result = await run(deliveryPath);
} finally {
  await handle.close();
  await stopEmbedded?.();
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  JSON.stringify(
    { database: values['postgres-url'] ? 'postgres' : 'PGlite in its own process behind the loopback socket (as embedded)', webhooks: webhookCount, result },
    null,
    2,
  ),
);
