import { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import * as schema from './schema.ts';

/** The database, whichever driver is behind it. Transactions have this type too. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>;

/** Where the data lives: a Postgres server, or a PGlite database opened in this process. */
export type DatabaseTarget =
  | { kind: 'postgres'; url: string; poolMax?: number }
  | { kind: 'pglite'; dataDir?: string };

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
export async function openDatabase(target: DatabaseTarget): Promise<DatabaseHandle> {
  if (target.kind === 'postgres') {
    const client = postgres(target.url, {
      max: target.poolMax ?? 10,
      onnotice: () => {},
      connect_timeout: 10,
    });
    return {
      db: drizzlePostgres(client, { schema }),
      target,
      migrate: () => migratePostgresLocked(target.url),
      close: () => client.end({ timeout: 5 }),
    };
  }
  const client = await PGlite.create(target.dataDir);
  const db = drizzlePglite(client, { schema });
  return {
    db,
    target,
    // A PGlite database belongs to this one process, so there is nobody to race with.
    migrate: () => migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER }),
    close: () => client.close(),
  };
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

/** Throws unless the database answers a trivial query. */
export async function pingDatabase(db: Database): Promise<void> {
  await db.execute(sql`select 1`);
}
