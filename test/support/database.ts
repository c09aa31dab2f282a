import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { parseConfig } from '../../src/config.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/client.ts';

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
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

/**
 * A migrated, empty database of the kind the suite runs on: a scratch database on the
 * DATABASE_URL server, or an in-memory PGlite.
 */
export async function openTestDatabase(): Promise<DatabaseHandle> {
  if (databaseKind === 'pglite') {
    const handle = await openDatabase({ kind: 'pglite' });
    await handle.migrate();
    return handle;
  }
  const scratch = await createScratchPostgresDatabase();
  const handle = await openDatabase({ kind: 'postgres', url: scratch.url, poolMax: 10 });
  await handle.migrate();
  return {
    ...handle,
    async close() {
      await handle.close();
      await scratch.drop();
    },
  };
}
