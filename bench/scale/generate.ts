/**
 * The scale data generator: months of traffic written straight in SQL (INSERT … SELECT over
 * generate_series, no round trip per row), in the service's own tables and id format, so the
 * API, the retention sweep and EXPLAIN meet the data they would meet in production.
 *
 * Shape: `projects` projects of `webhooksPerProject` webhooks each (all subscribed to
 * `docauth.completed`); events spread evenly over the last `spanDays` days, shared out between
 * projects unevenly (a cubic skew: the first project receives about a fifth of all events, as a
 * large customer does); each event fans out to `fanOut` webhooks of its project, the project's
 * first webhook always among them (so that webhook is the largest). Statuses: 96% delivered
 * (a tenth of them on a second attempt), 2.5% dead_letter (5 attempts), 0.5% each failed,
 * pending and processing. Attempts are rows of their own, as the worker writes them.
 *
 * Sealed values (payloads, webhook secrets, lookup hashes) are filler of the length the real
 * ones have (558, 122 and 73 characters for the test event): sealing ten million values with
 * AES-GCM would add nothing a size measurement needs, and nothing opens a generated payload.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../../src/db/client.ts';
import { ID_PREFIX } from '../../src/ids.ts';

/** How much data, and how it is spread. */
export interface HistoryShape {
  projects: number;
  webhooksPerProject: number;
  /** Deliveries in all (events = deliveries / fanOut). */
  deliveries: number;
  /** Deliveries per event (webhooks of the project each event goes to). */
  fanOut: number;
  /** Events are spread over the `spanDays` days before `now`. */
  spanDays: number;
}

/** Ten million deliveries across 10,000 webhooks of 100 projects, over 60 days. */
export const FULL_SHAPE: HistoryShape = { projects: 100, webhooksPerProject: 100, deliveries: 10_000_000, fanOut: 10, spanDays: 60 };

/** Events per INSERT statement: bounds each statement's memory and WAL, and paces the progress line. */
const EVENTS_PER_CHUNK = 20_000;

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/** SQL text: `width` Crockford base32 characters of the bigint expression `value`, most significant first. */
function crockford(value: string, width: number): string {
  const digits: string[] = [];
  for (let i = width - 1; i >= 0; i -= 1) {
    // A bigint has 63 value bits: higher digits are 0 (PostgreSQL takes shift counts modulo 64).
    digits.push(5 * i < 63 ? `substr('${CROCKFORD}', (((${value}) >> ${5 * i}) & 31)::int + 1, 1)` : `'0'`);
  }
  return digits.join(' || ');
}

/** SQL text: an id of the service's format (src/ids.ts) from a millisecond time and a unique sequence number. */
const idOf = (kind: keyof typeof ID_PREFIX, timeMs: string, sequence: string) =>
  `'${ID_PREFIX[kind]}_' || ${crockford(timeMs, 10)} || ${crockford(sequence, 16)}`;

/** SQL text: filler of `length` characters, different per `seed`. */
const filler = (prefix: string, seed: string, length: number) =>
  `left('${prefix}' || repeat(md5((${seed})::text), ${Math.ceil(length / 32) + 1}), ${length})`;

/** The generated project ids, `prj_gen_000`, …, in order. */
export const generatedProjectId = (index: number) => `prj_gen_${String(index).padStart(3, '0')}`;

/** What the generator wrote. */
export interface GeneratedHistory {
  events: number;
  deliveries: number;
  attempts: number;
  seconds: number;
}

/**
 * Writes the shape's api keys, webhooks, events, deliveries and attempts into `db` (migrated,
 * without generated rows yet), `now` being the newest instant. `onProgress` sees the share done.
 */
export async function generateHistory(
  db: Database,
  shape: HistoryShape,
  options: { now?: Date; onProgress?: (done: number) => void } = {},
): Promise<GeneratedHistory> {
  if (shape.fanOut > shape.webhooksPerProject) throw new Error('fanOut cannot exceed webhooksPerProject');
  const started = Date.now();
  const nowMs = (options.now ?? new Date()).getTime();
  const spanMs = shape.spanDays * 86_400_000;
  const startMs = nowMs - spanMs;
  const eventCount = Math.ceil(shape.deliveries / shape.fanOut);
  const { projects: P, webhooksPerProject: W, fanOut: F } = shape;
  const webhookTime = `${startMs - 86_400_000}::bigint`;
  const projectExpr = (p: string) => `'prj_gen_' || lpad((${p})::text, 3, '0')`;

  await db.execute(
    sql.raw(`
      insert into api_keys (id, project_id, name, token_hash, services, created_at)
      select ${idOf('apiKey', webhookTime, 'p')}, ${projectExpr('p')}, 'generated', md5('key' || p), array['webhooks'],
             to_timestamp(${webhookTime} / 1000.0)
      from generate_series(0, ${P - 1}) as p`),
  );
  await db.execute(
    sql.raw(`
      insert into webhooks (id, project_id, api_key_id, url, events, status, headers, secret_sealed, created_at, updated_at)
      select ${idOf('webhook', webhookTime, 'w')}, ${projectExpr(`w / ${W}`)}, ${idOf('apiKey', webhookTime, `w / ${W}`)},
             'https://hooks.example.com/' || (w / ${W}) || '/' || (w % ${W}), array['docauth.completed'], 'active', '{}'::jsonb,
             ${filler('v1:gen:', "'s' || w", 122)}, to_timestamp(${webhookTime} / 1000.0), to_timestamp(${webhookTime} / 1000.0)
      from generate_series(0, ${P * W - 1}) as w`),
  );

  // Per event e: its time, and its project (cubic skew of a multiplicative hash of e).
  const eventTime = (e: string) => `(${startMs}::bigint + (${e})::bigint * ${spanMs}::bigint / ${eventCount})`;
  const eventProject = (e: string) => `least(${P - 1}, floor(${P} * power((((${e})::bigint * 2654435761) % 4294967296) / 4294967296.0, 3))::int)`;
  // Per delivery (event e, k-th of its fan-out): its webhook number, bucket (status) and attempts.
  const webhookNumber = `(project * ${W} + case when k = 0 then 0 else 1 + ((e / ${P}) * 7 + k) % ${W - 1} end)`;
  const bucket = `((e::bigint * ${F} + k) * 7919 % 1000)`;
  const status = `case when ${bucket} < 960 then 'delivered' when ${bucket} < 985 then 'dead_letter' when ${bucket} < 990 then 'failed'
                       when ${bucket} < 995 then 'pending' else 'processing' end`;
  const attemptCount = `case when ${bucket} < 960 then 1 + (${bucket} % 10 = 0)::int when ${bucket} < 985 then 5
                             when ${bucket} < 990 then 2 when ${bucket} < 995 then 0 else 1 end`;

  let events = 0;
  let deliveries = 0;
  let attempts = 0;
  for (let first = 0; first < eventCount; first += EVENTS_PER_CHUNK) {
    const last = Math.min(eventCount, first + EVENTS_PER_CHUNK) - 1;
    const insertedEvents = await queryRows<{ n: number }>(
      db,
      sql.raw(`
        with inserted as (
          insert into events (id, project_id, producer_event_id, event, occurred_at, payload_sealed, request_id_hash, created_at, dispatched_at)
          select ${idOf('event', eventTime('e'), 'e')}, ${projectExpr(eventProject('e'))}, 'gen-' || e, 'docauth.completed',
                 to_timestamp(${eventTime('e')} / 1000.0), ${filler('v1:gen:', 'e', 558)}, ${filler('gen:', "'r' || e", 73)},
                 to_timestamp(${eventTime('e')} / 1000.0), to_timestamp(${eventTime('e')} / 1000.0)
          from generate_series(${first}, ${last}) as e
          returning 1)
        select count(*)::int as n from inserted`),
    );
    // Each generated delivery, with what its rows need; used by both statements below.
    const generated = `
      select e, k, ${eventTime('e')} as created_ms, ${idOf('delivery', `${eventTime('e')} + k`, `e::bigint * ${F} + k`)} as id,
             ${idOf('webhook', webhookTime, webhookNumber)} as webhook_id, ${idOf('event', eventTime('e'), 'e')} as event_id,
             ${status} as status, ${attemptCount} as attempt_count
      from (select e, k, ${eventProject('e')} as project from generate_series(${first}, ${last}) as e, generate_series(0, ${F - 1}) as k) as spread`;
    const insertedDeliveries = await queryRows<{ n: number }>(
      db,
      sql.raw(`
        with inserted as (
          insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, delivered_at, last_error,
                                  last_status_code, next_retry_at, updated_at)
          select id, webhook_id, event_id, 'docauth.completed', status, attempt_count, to_timestamp(created_ms / 1000.0),
                 case when status = 'delivered' then to_timestamp((created_ms + attempt_count * 1000) / 1000.0) end,
                 case when status in ('dead_letter', 'failed') then 'HTTP 503 Service Unavailable' end,
                 case when status = 'delivered' then 200 when status in ('dead_letter', 'failed') then 503 end,
                 case when status = 'failed' then to_timestamp((created_ms + 4000) / 1000.0) end,
                 to_timestamp((created_ms + attempt_count * 3000) / 1000.0)
          from (${generated}) as g
          returning 1)
        select count(*)::int as n from inserted`),
    );
    const insertedAttempts = await queryRows<{ n: number }>(
      db,
      sql.raw(`
        with inserted as (
          insert into delivery_attempts (id, delivery_id, attempt_number, started_at, duration_ms, status_code, error, outcome)
          select ${idOf('attempt', 'created_ms + (n - 1) * 3000', `(e::bigint * ${F} + k) * 8 + n`)}, id, n,
                 to_timestamp((created_ms + (n - 1) * 3000) / 1000.0),
                 case when status = 'processing' then null else 20 + (e + n) % 180 end,
                 case when status = 'processing' then null when status = 'delivered' and n = attempt_count then 200 else 503 end,
                 case when status = 'processing' or (status = 'delivered' and n = attempt_count) then null else 'HTTP 503 Service Unavailable' end,
                 case when status = 'processing' then 'in_progress' when status = 'delivered' and n = attempt_count then 'succeeded' else 'http_error' end
          from (${generated}) as g, generate_series(1, g.attempt_count) as n
          returning 1)
        select count(*)::int as n from inserted`),
    );
    events += insertedEvents[0]!.n;
    deliveries += insertedDeliveries[0]!.n;
    attempts += insertedAttempts[0]!.n;
    options.onProgress?.((last + 1) / eventCount);
  }
  await db.execute(sql`analyze`);
  return { events, deliveries, attempts, seconds: (Date.now() - started) / 1000 };
}
