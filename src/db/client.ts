import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { sql, type SQL } from 'drizzle-orm';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import * as schema from './schema.ts';

/** The database, whichever driver is behind it. Transactions have this type too. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>;

/** Where the data lives: a Postgres server, or a PGlite database opened in this process. */
export type DatabaseTarget =
  | { kind: 'postgres'; url: string; poolMax?: number; timeouts?: StatementTimeouts }
  | { kind: 'pglite'; dataDir?: string };

/**
 * Limits on each statement of a pool's connections: one stuck statement, or one waiting on a
 * lock, gives its connection back within bounds instead of holding it while others queue.
 */
export interface StatementTimeouts {
  /** PostgreSQL's `statement_timeout`. */
  statementMs: number;
  /** PostgreSQL's `lock_timeout`. */
  lockMs: number;
}

/** How a database is opened beyond its target. */
export interface OpenOptions {
  /** Sees every statement the query builder sends, with its parameters (the scale benchmark EXPLAINs them). */
  logQuery?: (query: string, params: unknown[]) => void;
  /**
   * Sees the text of every statement sent to a `postgres` target, transaction control (`begin`,
   * `commit`) included: what the cost tests count. Not called for PGlite.
   */
  onStatement?: (text: string) => void;
}

/** An open database and the means to close it. */
export interface DatabaseHandle {
  readonly db: Database;
  readonly target: DatabaseTarget;
  /** Applies pending migrations; safe when several processes do it at once. */
  migrate(): Promise<void>;
  close(): Promise<void>;
}

const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));
/** Key of the advisory lock that serialises migrations across processes. */
const MIGRATION_LOCK_KEY = 727_001;

/**
 * Opens the database: postgres.js for a `postgres` target, PGlite (in memory when
 * `dataDir` is unset) for a `pglite` one. Both come back as one {@link Database} type.
 */
export async function openDatabase(target: DatabaseTarget, options: OpenOptions = {}): Promise<DatabaseHandle> {
  const logger = options.logQuery && { logQuery: options.logQuery };
  if (target.kind === 'postgres') {
    const client = abandonTransactionsOfLostConnections(
      postgres(target.url, {
        max: target.poolMax ?? 10,
        onnotice: () => {},
        ...(target.timeouts && {
          connection: { statement_timeout: target.timeouts.statementMs, lock_timeout: target.timeouts.lockMs },
        }),
        connect_timeout: 10,
        ...(options.onStatement && { debug: (_connection: number, text: string) => options.onStatement!(text) }),
        // Seconds a connection waits before reconnecting after a failure. The driver's default
        // grows to 10-20 s after a few refused connects, and every query queued on the pool
        // waits that long: a request made while Postgres is down would hang for up to 20 s, and
        // the service would stay unready that long after Postgres is back. At most ~1 s instead.
        backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1) * (0.5 + Math.random() / 2),
      }),
    );
    return {
      db: drizzlePostgres(client, { schema, ...(logger && { logger }) }),
      target,
      migrate: () => migratePostgresLocked(target.url),
      close: () => client.end({ timeout: 5 }),
    };
  }
  // Loaded only for a PGlite target: a service on PostgreSQL never loads PGlite.
  const [{ PGlite }, { drizzle: drizzlePglite }, { migrate: migratePglite }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
    import('drizzle-orm/pglite/migrator'),
  ]);
  const client = await PGlite.create(target.dataDir);
  const db = drizzlePglite(client, { schema, ...(logger && { logger }) });
  return {
    db,
    target,
    // A PGlite database belongs to this one process, so there is nobody to race with.
    migrate: () => migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER }),
    close: () => client.close(),
  };
}

/** Error codes meaning a connection died under a transaction: driver, socket, server shutdown (57P01/57P02). */
const CONNECTION_LOST_CODES = new Set(['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', '57P01', '57P02']);

/**
 * Error codes meaning the database cannot be reached at all, beyond a connection lost: refused or
 * timed-out connects, a pool closed, a host not found, a server starting or shutting down
 * (57P03), too many connections (53300), and SQLSTATE class 08 (connection exceptions).
 */
const UNREACHABLE_CODES = new Set([
  ...CONNECTION_LOST_CODES,
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P03',
  '53300',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** A lock not granted within `lock_timeout` (a migration, or another long transaction, holds the table or the row). */
const LOCKED_CODES = new Set(['55P03']);

/** True when `error`, or an error it wraps (a query error's `cause`), has one of `codes`. */
function hasErrorCode(error: unknown, codes: ReadonlySet<string>): boolean {
  for (let cause = error, depth = 0; cause && typeof cause === 'object' && depth < 5; depth += 1) {
    if (codes.has(String((cause as { code?: unknown }).code))) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

/** True when `error` is a foreign-key violation (23503): a row it refers to was deleted meanwhile. */
export function isForeignKeyViolation(error: unknown): boolean {
  return hasErrorCode(error, FOREIGN_KEY_VIOLATION);
}

const FOREIGN_KEY_VIOLATION = new Set(['23503']);

/** Why the database was not available to a statement: see {@link databaseUnavailableReason}. */
export type UnavailableReason = 'database_unreachable' | 'database_locked';

/**
 * Why a statement failed when the database was not available to it, not because of what it asked
 * (the same may succeed later): `database_unreachable` (down, restarting, failing over, out of
 * connections) or `database_locked` (a lock held past `lock_timeout`); undefined for any other
 * failure. A connection lost under a statement may have committed it, so only what is safe to
 * repeat is tried again.
 */
export function databaseUnavailableReason(error: unknown): UnavailableReason | undefined {
  if (hasErrorCode(error, UNREACHABLE_CODES)) return 'database_unreachable';
  if (hasErrorCode(error, LOCKED_CODES)) return 'database_locked';
  return undefined;
}

/** Pauses between tries of {@link retryWhileUnavailable}: doubling from 250 ms to 5 s. */
const UNAVAILABLE_RETRY_MS = { first: 250, max: 5_000 };

/** How long, and for what, {@link retryWhileUnavailable} tries again. */
export interface UnavailableTries {
  /** The last moment to try again, on the monotonic clock (`performance.now()`): a step of the wall clock neither ends the tries early nor stretches them. */
  until: number;
  /** Stops the tries at once. */
  signal: AbortSignal;
  /** The reasons worth another try; any by default. */
  reasons?: readonly UnavailableReason[];
}

/**
 * Runs `work` (statements safe to repeat), and runs it again while it fails because the database
 * is not available (for one of `reasons`, by default any), until `until` or `signal` aborts; then
 * the last error is thrown. Any other error is thrown at once.
 */
export async function retryWhileUnavailable<T>(work: () => Promise<T>, { until, signal, reasons }: UnavailableTries): Promise<T> {
  for (let pauseMs = UNAVAILABLE_RETRY_MS.first; ; pauseMs = Math.min(pauseMs * 2, UNAVAILABLE_RETRY_MS.max)) {
    try {
      return await work();
    } catch (error) {
      const reason = databaseUnavailableReason(error);
      if (reason === undefined || (reasons && !reasons.includes(reason)) || signal.aborted || performance.now() + pauseMs >= until) throw error;
      const aborted = await sleep(pauseMs, false, { signal }).catch(() => true);
      if (aborted) throw error;
    }
  }
}

/**
 * Works around a postgres.js 3.4.9 crash (porsager/postgres#1154, #1208): when the connection
 * of a transaction dies (Postgres stopped or restarted), the failing query makes `begin()`
 * write ROLLBACK to that connection after the driver has dropped its socket; the write runs
 * in a setImmediate and throws a TypeError nothing can catch, which kills the process.
 *
 * So a transaction callback that fails because its connection is gone is left pending
 * instead: `begin()` still rejects, by itself, when the driver reports the connection closed
 * (its race on the connection's close), and the pointless ROLLBACK is never written (the
 * server rolled the transaction back when the session ended). Callbacks must only use the
 * transaction handle, so such an error always comes from the connection that closes.
 */
function abandonTransactionsOfLostConnections(client: postgres.Sql): postgres.Sql {
  const begin = client.begin.bind(client) as (...args: unknown[]) => Promise<unknown>;
  const guardedBegin = (...args: unknown[]) => {
    const callback = args.pop() as (sql: unknown) => unknown;
    return begin(...args, async (sql: unknown) => {
      try {
        const result = callback(sql);
        return await (Array.isArray(result) ? Promise.all(result) : result);
      } catch (error) {
        if (hasErrorCode(error, CONNECTION_LOST_CODES)) return new Promise<never>(() => {});
        throw error;
      }
    });
  };
  return new Proxy(client, {
    get: (target, property, receiver) => (property === 'begin' ? guardedBegin : Reflect.get(target, property, receiver)),
  });
}

async function migratePostgresLocked(url: string): Promise<void> {
  // Advisory locks belong to a session: one dedicated connection holds the lock and runs the migrations.
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await client`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    await migratePostgres(drizzlePostgres(client), { migrationsFolder: MIGRATIONS_FOLDER });
  } finally {
    await client`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.catch(() => {});
    await client.end({ timeout: 5 });
  }
}

/**
 * Runs a statement written in SQL (one with data-modifying CTEs, say) and returns its rows,
 * whichever driver is behind `db`: postgres.js answers an array, PGlite `{ rows }`.
 */
export async function queryRows<Row>(db: Database, query: SQL): Promise<Row[]> {
  const result: unknown = await db.execute(query);
  return (Array.isArray(result) ? result : (result as { rows: Row[] }).rows) as Row[];
}

/** Throws unless the database answers a trivial query. */
export async function pingDatabase(db: Database): Promise<void> {
  await db.execute(sql`select 1`);
}
