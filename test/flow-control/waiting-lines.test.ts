import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { openDatabase, queryRows, type Database, type DatabaseHandle } from '../../src/db/client.ts';
import { acquireSendPlaces, releaseSendPlaces, type FlowLimits } from '../../src/flow-control/places.ts';
import { BASE, publishFor, waitForDelivery } from '../delivery/support.ts';
import { databaseKind } from '../support/database.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';

/*
 * Waiting lines of any length, on PostgreSQL: with 200,000 deliveries waiting at one endpoint,
 * taking and giving back a place costs what it costs with ten waiting, counted in statements and
 * rows read (not timed), and the rechecks of the long line make no one else wait on a lock while
 * other customers' real deliveries go out.
 */

const LONG_LINE = 200_000;
const SHORT_LINE = 10;
const limits: FlowLimits = { webhookMaxInFlight: 10, projectMaxInFlight: 100, destinationMaxInFlight: 200, holdMs: 60_000, reserveMs: 60_000 };

let h: Harness;
let receiver: HttpsReceiver;

beforeAll(async () => {
  if (databaseKind !== 'postgres') return;
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, delivery: { caFile: receiver.certFile } });
}, 120_000);
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

/**
 * A webhook (of a project of its own) whose places are all held for an hour and `waiting`
 * deliveries waiting in its line, seeded in a few statements. Answers the webhook, its waiting
 * deliveries' ids in line order, and its holders'.
 */
async function seedLine(db: Database, name: string, waiting: number) {
  const key = await h.createKey(`lines-${name}`);
  const created = await h.request('POST', `${BASE}/webhooks`, {
    token: key.token,
    body: { api_key_id: key.id, url: `${receiver.url}/${name}`, events: ['docauth.completed'] },
  });
  const webhookId: string = created.body.data.id;
  const total = waiting + limits.webhookMaxInFlight;
  const id = (kind: string) => sql.raw(`'${kind}_${name}_' || lpad(n::text, 7, '0')`);
  await db.execute(sql`insert into events (id, project_id, producer_event_id, event, occurred_at, created_at, dispatched_at)
    select ${id('evt')}, ${key.projectId}, ${id('seed')}, 'docauth.completed', now(), now(), now() from generate_series(1, ${total}::int) as n`);
  await db.execute(sql`insert into deliveries (id, webhook_id, event_id, event, status, attempt_count, created_at, updated_at)
    select ${id('dlv')}, ${webhookId}, ${id('evt')}, 'docauth.completed', 'pending', 0, now(), now() from generate_series(1, ${total}::int) as n`);
  const [hook] = await queryRows<{ destination: string }>(db, sql`select destination from webhooks where id = ${webhookId}`);
  // The first deliveries hold every place of the webhook, for an hour; the rest wait in line, in order.
  await db.execute(sql`insert into send_places (scope, slot, delivery_id, attempt, expires_at)
    select ${`w:${webhookId}`}, n, ${id('dlv')}, 'seed', now() + interval '1 hour' from generate_series(1, ${limits.webhookMaxInFlight}::int) as n`);
  await db.execute(sql`insert into send_waiters (delivery_id, webhook_id, project_id, destination, blocked, blocked_since)
    select ${id('dlv')}, ${webhookId}, ${key.projectId}, ${hook!.destination}, 'webhook', now()
    from generate_series(${limits.webhookMaxInFlight + 1}::int, ${total}::int) as n order by n`);
  const deliveryOf = (n: number) => `dlv_${name}_${String(n).padStart(7, '0')}`;
  return { webhookId, holder: deliveryOf(1), head: deliveryOf(limits.webhookMaxInFlight + 1), deep: deliveryOf(total) };
}

/** What one statement cost, read from PostgreSQL's own counters of the transaction it ran in. */
interface Cost {
  statements: number;
  rowsRead: number;
  sequentialScans: number;
}

/**
 * Runs the service's calls in a transaction on a connection of its own and reads what they read
 * (`pg_stat_xact_*`: this transaction's accesses, those of the functions it called included).
 */
async function costOf(url: string, calls: (db: Database) => Promise<unknown>): Promise<Cost> {
  let statements = 0;
  const counted: DatabaseHandle = await openDatabase({ kind: 'postgres', url, poolMax: 1 }, { logQuery: () => (statements += 1) });
  try {
    return await counted.db.transaction(async (tx) => {
      await calls(tx);
      const made = statements;
      const [row] = await queryRows<{ rows_read: number; sequential_scans: number }>(
        tx,
        sql`select (select coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) from pg_stat_xact_user_tables)::int as rows_read,
                   (select coalesce(sum(seq_scan), 0) from pg_stat_xact_user_tables where relname in ('send_waiters', 'send_places'))::int as sequential_scans`,
      );
      return { statements: made, rowsRead: row!.rows_read, sequentialScans: row!.sequential_scans };
    });
  } finally {
    await counted.close();
  }
}

const acquire = (deliveryId: string) => (db: Database) => acquireSendPlaces(db, deliveryId, `measure/${deliveryId}`, limits);
const releaseSeeded = (deliveryId: string) => (db: Database) => releaseSendPlaces(db, deliveryId, 'seed', limits);
const releaseMeasured = (deliveryId: string) => (db: Database) => releaseSendPlaces(db, deliveryId, `measure/${deliveryId}`, limits);

describe.skipIf(databaseKind !== 'postgres')('waiting lines of any length (PostgreSQL)', () => {
  it('takes and gives back a place at the same cost with 10 or 200,000 deliveries waiting at one endpoint', async () => {
    const url = await databaseUrl(h.db);
    const short = await seedLine(h.db, 'short', SHORT_LINE);
    const long = await seedLine(h.db, 'long', LONG_LINE);
    const [count] = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from send_waiters where webhook_id = ${long.webhookId}`);
    expect(count!.n).toBe(LONG_LINE);
    // The places of 20,000 other webhooks, as a busy installation has them.
    await h.db.execute(sql`insert into send_places (scope, slot) select 'w:wh_other_' || (n / 10), n % 10 + 1 from generate_series(0, 199999) as n`);
    await h.db.execute(sql`analyze send_waiters`);
    await h.db.execute(sql`analyze send_places`);

    const costs = async (line: typeof short) => ({
      // A delivery deep in line asks again (its recheck): it is told to wait, behind the others.
      deepRecheck: await costOf(url, acquire(line.deep)),
      // A holder's attempt ends: its places come back, and the head of the line is woken.
      release: await costOf(url, releaseSeeded(line.holder)),
      // The woken head takes the places, then gives them back after its attempt.
      headTakes: await costOf(url, acquire(line.head)),
      headGivesBack: await costOf(url, releaseMeasured(line.head)),
    });
    const shortCosts = await costs(short);
    const longCosts = await costs(long);
    for (const step of Object.keys(shortCosts) as (keyof typeof shortCosts)[]) {
      expect(longCosts[step].statements, step).toBe(1);
      expect(longCosts[step].sequentialScans, step).toBe(0);
      // The same rows, never the line (measured: 4-23 rows a call). Give or take one, and the
      // deliveries ahead that a recheck counts (at most the webhook's limit): an index-only scan
      // fetches them from the table only where the visibility map does not yet mark their pages
      // all-visible, which an open transaction of another connection can delay for one line and
      // not the other.
      expect(longCosts[step].rowsRead, step).toBeLessThanOrEqual(shortCosts[step].rowsRead + limits.webhookMaxInFlight + 1);
      expect(longCosts[step].rowsRead, step).toBeLessThan(40);
    }
  }, 300_000);

  it("makes no one wait on a lock while the long line's deliveries ask again and other customers' deliveries go out", async () => {
    const url = await databaseUrl(h.db);
    const long = await seedLine(h.db, 'busy', LONG_LINE);
    // Named, so that the lock waits the line's rechecks take part in can be told from those of the
    // other customers' deliveries among themselves (two of them may take the same free place at
    // one instant, and one then waits a statement's time for the other).
    const rechecksUrl = new URL(url);
    rechecksUrl.searchParams.set('application_name', LINE_RECHECKS);
    const rechecking = await openDatabase({ kind: 'postgres', url: rechecksUrl.toString(), poolMax: 8 });
    const watcher = await openDatabase({ kind: 'postgres', url, poolMax: 1 });
    const lockWaits: unknown[] = [];
    let running = true;
    try {
      // Eight connections of rechecks, from deliveries all along the line.
      const rechecks = Array.from({ length: 8 }, async (_, worker) => {
        let n = 0;
        while (running) {
          const position = limits.webhookMaxInFlight + 1 + ((worker * 25_013 + n * 7_919) % LONG_LINE);
          await acquireSendPlaces(rechecking.db, `dlv_busy_${String(position).padStart(7, '0')}`, `recheck/${n}`, limits);
          n += 1;
        }
        return n;
      });
      const watching = (async () => {
        while (running) {
          // Waits of this database's sessions (the other test files' databases are on the same
          // server) in which a recheck of the long line waits or makes another wait.
          lockWaits.push(
            ...(await queryRows(
              watcher.db,
              sql`select l.locktype, l.relation::regclass::text as relation, l.mode, a.query, a.application_name
                  from pg_locks l join pg_stat_activity a on a.pid = l.pid
                  where not l.granted and a.datname = current_database()
                    and (a.application_name = ${LINE_RECHECKS} or exists (
                      select 1 from pg_stat_activity b where b.pid = any (pg_blocking_pids(a.pid)) and b.application_name = ${LINE_RECHECKS}))`,
            )),
          );
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();

      // Other customers publish; their real workflows take and give back places beside the line.
      const customers = [];
      for (let i = 0; i < 3; i += 1) {
        const key = await h.createKey();
        const created = await h.request('POST', `${BASE}/webhooks`, {
          token: key.token,
          body: { api_key_id: key.id, url: `${receiver.url}/customer-${i}`, events: ['docauth.completed'] },
        });
        customers.push({ key, webhookId: created.body.data.id as string });
      }
      const published = [];
      for (let round = 0; round < 10; round += 1) {
        for (const customer of customers) published.push({ customer, ids: (await publishFor(h, customer.key.projectId)).delivery_ids });
      }
      for (const { customer, ids } of published) {
        for (const id of ids) await waitForDelivery(h, customer.key.token, customer.webhookId, id, (d) => d.status === 'delivered' && d.attempt_count === 1);
      }
      running = false;
      const made = await Promise.all(rechecks);
      await watching;
      expect(made.reduce((sum, n) => sum + n, 0)).toBeGreaterThan(100);
      expect(lockWaits).toEqual([]);
      // The long line did not move: its places are held for an hour.
      const [count] = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from send_waiters where webhook_id = ${long.webhookId}`);
      expect(count!.n).toBe(LONG_LINE);
    } finally {
      running = false;
      await rechecking.close();
      await watcher.close();
    }
  }, 300_000);
});

/** The postgres:// URL of the harness's scratch database. */
/** The `application_name` of the connections the long line's rechecks run on. */
const LINE_RECHECKS = 'line_rechecks';

async function databaseUrl(db: Database): Promise<string> {
  const [row] = await queryRows<{ name: string }>(db, sql`select current_database() as name`);
  const config = parseConfig(process.env).database;
  if (config.kind !== 'postgres') throw new Error('DATABASE_URL is not set');
  const url = new URL(config.url);
  url.pathname = `/${row!.name}`;
  return url.toString();
}

