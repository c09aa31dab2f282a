import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { is, sql, type SQL } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database, type DatabaseHandle, type DatabaseTarget } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/local/embedded-database.ts';
import * as schema from '../../src/db/schema.ts';
import { createScratchPostgresDatabase, databaseKind } from '../support/database.ts';
import { freePort } from '../support/ports.ts';

const run = promisify(execFile);
const projectRoot = path.resolve(import.meta.dirname, '../..');
const schemaTables: PgTable[] = (Object.values(schema) as unknown[]).filter((value): value is PgTable => is(value, PgTable));

let migrationFileCount = 0;
let tmp: string;
let embedded: EmbeddedPostgres;

beforeAll(async () => {
  migrationFileCount = (await readdir(path.join(projectRoot, 'drizzle'))).filter((file) => file.endsWith('.sql')).length;
  tmp = await mkdtemp(path.join(os.tmpdir(), 'migrations-test-'));
  embedded = await startEmbeddedPostgres(path.join(tmp, 'pglite'), await freePort());
});
afterAll(async () => {
  await embedded?.stop();
  await rm(tmp, { recursive: true, force: true });
});

/** Rows of a query, whichever driver runs it. */
async function rows(db: Database, query: SQL): Promise<Record<string, unknown>[]> {
  const result: unknown = await db.execute(query);
  return Array.isArray(result) ? result : (result as { rows: Record<string, unknown>[] }).rows;
}

async function appliedMigrationCount(db: Database): Promise<number> {
  const [row] = await rows(db, sql`select count(*)::int as n from drizzle.__drizzle_migrations`);
  return row!.n as number;
}

/** Every table, column and index that src/db/schema.ts declares exists in the database. */
async function expectSchemaTables(db: Database): Promise<void> {
  expect(schemaTables.length).toBeGreaterThanOrEqual(5);
  for (const table of schemaTables) {
    const config = getTableConfig(table);
    const columns = await rows(
      db,
      sql`select column_name from information_schema.columns
          where table_schema = 'public' and table_name = ${config.name} order by column_name`,
    );
    expect({ table: config.name, columns: columns.map((column) => column.column_name) }).toEqual({
      table: config.name,
      columns: config.columns.map((column) => column.name).sort(),
    });
    const indexes = await rows(db, sql`select indexname from pg_indexes where schemaname = 'public' and tablename = ${config.name}`);
    const indexNames = indexes.map((index) => index.indexname);
    for (const index of config.indexes) expect(indexNames).toContain(index.config.name);
  }
}

interface Target {
  name: string;
  runsOn: 'pglite' | 'postgres';
  open(): Promise<{ target: DatabaseTarget; cleanup(): Promise<void> }>;
}

const targets: Target[] = [
  {
    name: 'an in-process PGlite',
    runsOn: 'pglite',
    open: async () => ({ target: { kind: 'pglite' }, cleanup: async () => {} }),
  },
  {
    name: 'the PGlite that `npm start` serves over its socket',
    runsOn: 'pglite',
    open: async () => ({ target: { kind: 'postgres', url: embedded.url, poolMax: 2 }, cleanup: async () => {} }),
  },
  {
    name: 'a fresh Postgres database',
    runsOn: 'postgres',
    async open() {
      const scratch = await createScratchPostgresDatabase();
      return { target: { kind: 'postgres', url: scratch.url, poolMax: 2 }, cleanup: () => scratch.drop() };
    },
  },
];

describe.each(targets)('migrations on $name', ({ runsOn, open }) => {
  it.skipIf(runsOn === 'postgres' && databaseKind !== 'postgres')(
    'apply twice without error and leave one applied row per migration file and every table of the schema',
    async () => {
      const { target, cleanup } = await open();
      let handle: DatabaseHandle | undefined;
      try {
        handle = await openDatabase(target);
        await handle.migrate();
        await handle.migrate();
        if (target.kind === 'postgres') {
          // A second process starting on the same database.
          const again = await openDatabase(target);
          await again.migrate().finally(() => again.close());
        }

        expect(migrationFileCount).toBeGreaterThan(0);
        expect(await appliedMigrationCount(handle.db)).toBe(migrationFileCount);
        await expectSchemaTables(handle.db);
      } finally {
        await handle?.close();
        await cleanup();
      }
    },
  );
});

describe('concurrent migrations on a fresh Postgres database', () => {
  it.skipIf(databaseKind !== 'postgres')(
    'all succeed from five connections at once and apply each migration exactly once',
    async () => {
      const scratch = await createScratchPostgresDatabase();
      const handles = await Promise.all(
        Array.from({ length: 5 }, () => openDatabase({ kind: 'postgres', url: scratch.url, poolMax: 1 })),
      );
      try {
        const outcomes = await Promise.allSettled(handles.map((handle) => handle.migrate()));

        expect(outcomes.map((outcome) => outcome.status)).toEqual(Array(5).fill('fulfilled'));
        expect(await appliedMigrationCount(handles[0]!.db)).toBe(migrationFileCount);
        await expectSchemaTables(handles[0]!.db);
      } finally {
        await Promise.all(handles.map((handle) => handle.close()));
        await scratch.drop();
      }
    },
  );

  it.skipIf(databaseKind !== 'postgres')(
    'all succeed from five `migrate` processes started together',
    async () => {
      const scratch = await createScratchPostgresDatabase();
      try {
        const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: scratch.url, LOG_LEVEL: 'warn' };
        const results = await Promise.all(
          Array.from({ length: 5 }, () =>
            run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'migrate'], { cwd: projectRoot, env, timeout: 120_000 }).then(
              () => 'exit 0',
              (error: { code?: number; stderr?: string; stdout?: string }) =>
                `exit ${error.code}: ${error.stderr ?? ''}${error.stdout ?? ''}`,
            ),
          ),
        );

        expect(results).toEqual(Array(5).fill('exit 0'));
        const handle = await openDatabase({ kind: 'postgres', url: scratch.url, poolMax: 1 });
        try {
          expect(await appliedMigrationCount(handle.db)).toBe(migrationFileCount);
        } finally {
          await handle.close();
        }
      } finally {
        await scratch.drop();
      }
    },
    180_000,
  );
});
