import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { parseConfig } from '../../src/config.ts';
import { openDatabase, type DatabaseHandle, type OpenOptions, type StatementTimeouts } from '../../src/db/client.ts';
import { startEmbeddedPostgres } from '../../src/local/embedded-database.ts';
import { freePort } from './ports.ts';
import { deadlineIn } from './wait.ts';

/** Which database the suite runs on: real Postgres when DATABASE_URL is set, PGlite otherwise. */
export const databaseKind = parseConfig(process.env).database.kind;

/** A fresh Postgres database on the DATABASE_URL server; dropped by `drop()`. */
export async function createScratchPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const config = parseConfig(process.env);
  if (config.database.kind !== 'postgres') throw new Error('DATABASE_URL is not set');
  const admin = postgres(config.database.url, { max: 1, onnotice: () => {} });
  const name = `webhooks_test_${randomBytes(6).toString('hex')}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(config.database.url);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      try {
        await dropScratchDatabase(admin, name);
      } finally {
        await admin.end();
      }
    },
  };
}

/** Insufficient privilege: a backend this role may not terminate is connected to the database. */
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * Drops a scratch database `with (force)`. When another role's backend is connected (an
 * autovacuum worker, say) and this role lacks `pg_signal_backend`, the drop is refused; it is
 * tried again until that backend has left, for up to `patienceMs`.
 */
export async function dropScratchDatabase(
  admin: postgres.Sql,
  name: string,
  patienceMs = 60_000,
): Promise<void> {
  const deadline = deadlineIn(patienceMs);
  for (;;) {
    try {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      return;
    } catch (error) {
      const refused = error instanceof postgres.PostgresError && error.code === INSUFFICIENT_PRIVILEGE;
      if (!refused || deadline.passed()) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** How a test database is opened: the options of any database, and on PostgreSQL its statement timeouts. */
export interface TestDatabaseOptions extends OpenOptions {
  /** `statement_timeout` and `lock_timeout` of its connections (PostgreSQL only); none otherwise. */
  timeouts?: StatementTimeouts;
}

/**
 * A migrated, empty database of the kind the suite runs on: a scratch database on the
 * DATABASE_URL server, or an in-memory PGlite.
 */
export async function openTestDatabase(options: TestDatabaseOptions = {}): Promise<DatabaseHandle> {
  if (databaseKind === 'pglite') {
    const handle = await openDatabase({ kind: 'pglite' }, options);
    await handle.migrate();
    return handle;
  }
  const scratch = await createScratchPostgresDatabase();
  const handle = await openDatabase({ kind: 'postgres', url: scratch.url, poolMax: 10, ...(options.timeouts && { timeouts: options.timeouts }) }, options);
  await handle.migrate();
  return {
    ...handle,
    async close() {
      await handle.close();
      await scratch.drop();
    },
  };
}

/** A migrated database that both this process and a CLI child process reach. */
export interface SharedTestDatabase extends DatabaseHandle {
  /** Environment that points the CLI at it: DATABASE_URL, or PGLITE_PORT and DATA_DIR. */
  cliEnv: Record<string, string>;
  /** Its postgres:// URL (PGlite's on its loopback port), for a service started as DATABASE_URL. */
  url: string;
}

/**
 * A database the CLI can reach as well as the test: a scratch database on the DATABASE_URL
 * server, or a PGlite folder served on a loopback port by this process (as `npm start` serves
 * it to `npm run cli`). Closing it drops the database, or stops the server and removes the folder.
 */
export async function openSharedTestDatabase(): Promise<SharedTestDatabase> {
  if (databaseKind === 'postgres') {
    const scratch = await createScratchPostgresDatabase();
    const handle = await openDatabase({ kind: 'postgres', url: scratch.url, poolMax: 10 });
    await handle.migrate();
    return {
      ...handle,
      cliEnv: { DATABASE_URL: scratch.url },
      url: scratch.url,
      async close() {
        await handle.close();
        await scratch.drop();
      },
    };
  }
  const folder = await mkdtemp(path.join(os.tmpdir(), 'shared-pglite-'));
  const port = await freePort();
  const embedded = await startEmbeddedPostgres(path.join(folder, 'pglite'), port);
  const handle = await openDatabase({ kind: 'postgres', url: embedded.url, poolMax: 2 });
  await handle.migrate();
  return {
    ...handle,
    cliEnv: { PGLITE_PORT: String(port), DATA_DIR: folder },
    url: embedded.url,
    async close() {
      await handle.close();
      await embedded.stop();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/**
 * Holds `table` of the PostgreSQL database at `url` in `access exclusive` mode, as a migration's
 * `ALTER TABLE` does, in a transaction on a connection of its own (not the service's pool, so not
 * counted by a statement counter), until the returned function (idempotent) gives it back.
 */
export async function holdTableLock(url: string, table: string): Promise<() => Promise<void>> {
  const holder = postgres(url, { max: 1, onnotice: () => {} });
  let giveBack!: () => void;
  const givenBack = new Promise<void>((resolve) => (giveBack = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const transaction = holder.begin(async (tx) => {
    await tx`lock table ${tx(table)} in access exclusive mode`;
    locked();
    await givenBack;
  });
  await Promise.race([isLocked, transaction]);
  let given: Promise<void> | undefined;
  return () =>
    (given ??= (async () => {
      giveBack();
      await transaction;
      await holder.end();
    })());
}
