/**
 * A statement that fails because its database is not available is told apart from one that fails
 * for what it asks, and is tried again until the database is back: on a real server (the embedded
 * PGlite server, over the PostgreSQL wire protocol) stopped and started again on its port; and on
 * PostgreSQL, a lock held past `lock_timeout`, tried again unless only an unreachable database is
 * (PGlite runs one statement at a time: nothing waits for a lock there).
 */
import { sql } from 'drizzle-orm';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { databaseUnavailableReason, openDatabase, queryRows, retryWhileUnavailable, type DatabaseHandle } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/local/embedded-database.ts';
import { createScratchPostgresDatabase, databaseKind, holdTableLock } from '../support/database.ts';
import { freePort } from '../support/ports.ts';

let folder: string;
let port: number;
let server: EmbeddedPostgres | undefined;
let handle: DatabaseHandle;
const dataDir = () => path.join(folder, 'pglite');
const never = new AbortController().signal;

beforeAll(async () => {
  folder = await mkdtemp(path.join(os.tmpdir(), 'unreachable-'));
  port = await freePort();
  server = await startEmbeddedPostgres(dataDir(), port);
  handle = await openDatabase({ kind: 'postgres', url: server.url, poolMax: 1 });
});
afterAll(async () => {
  await handle?.close();
  await server?.stop();
  await rm(folder, { recursive: true, force: true });
});

/** The error `work` fails with. */
async function failure(work: () => Promise<unknown>): Promise<unknown> {
  try {
    await work();
  } catch (error) {
    return error;
  }
  throw new Error('expected the statement to fail');
}

describe('a database that cannot be reached', () => {
  it('is told apart from a statement that failed for what it asked', async () => {
    const refused = await failure(() => handle.db.execute(sql`select * from no_such_table`));
    expect(databaseUnavailableReason(refused)).toBeUndefined();

    await server!.stop();
    server = undefined;
    const down = await failure(() => handle.db.execute(sql`select 1`));
    expect(databaseUnavailableReason(down)).toBe('database_unreachable');
  });

  it('is tried again until it is back, and the statement then runs', async () => {
    let tries = 0;
    const back = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      server = await startEmbeddedPostgres(dataDir(), port);
    })();
    const rows = await retryWhileUnavailable(
      () => {
        tries += 1;
        return queryRows<{ one: number }>(handle.db, sql`select 1 as one`);
      },
      { until: performance.now() + 60_000, signal: never },
    );
    await back;
    expect(rows).toEqual([{ one: 1 }]);
    expect(tries).toBeGreaterThan(1);
  });

  it('is tried again only until the deadline, and a statement that fails for what it asked is not tried again', async () => {
    let failingTries = 0;
    const refused = await failure(() =>
      retryWhileUnavailable(
        () => {
          failingTries += 1;
          return handle.db.execute(sql`select * from no_such_table`);
        },
        { until: performance.now() + 60_000, signal: never },
      ),
    );
    expect(databaseUnavailableReason(refused)).toBeUndefined();
    expect(failingTries).toBe(1);

    await server!.stop();
    server = undefined;
    let tries = 0;
    const startedAt = performance.now();
    const down = await failure(() =>
      retryWhileUnavailable(
        () => {
          tries += 1;
          return handle.db.execute(sql`select 1`);
        },
        { until: startedAt + 2_000, signal: never },
      ),
    );
    expect(databaseUnavailableReason(down)).toBe('database_unreachable');
    expect(tries).toBeGreaterThan(1);
  });

  it('is not tried again once the signal aborts', async () => {
    const stopping = new AbortController();
    stopping.abort();
    let tries = 0;
    const down = await failure(() =>
      retryWhileUnavailable(
        () => {
          tries += 1;
          return handle.db.execute(sql`select 1`);
        },
        { until: performance.now() + 60_000, signal: stopping.signal },
      ),
    );
    expect(databaseUnavailableReason(down)).toBe('database_unreachable');
    expect(tries).toBe(1);
  });

  it('is tried again until its deadline on the monotonic clock, however the wall clock steps in between', async () => {
    for (const stepMs of [3_600_000, -3_600_000]) {
      const wallClock = Date.now;
      const stepped = vi.spyOn(Date, 'now');
      try {
        let tries = 0;
        const startedAt = performance.now();
        const down = await failure(() =>
          retryWhileUnavailable(
            () => {
              tries += 1;
              // The machine's clock is set an hour forward (or back) after the first try.
              if (tries === 1) stepped.mockImplementation(() => wallClock.call(Date) + stepMs);
              return handle.db.execute(sql`select 1`);
            },
            { until: startedAt + 1_500, signal: never },
          ),
        );
        expect(databaseUnavailableReason(down)).toBe('database_unreachable');
        expect(tries).toBeGreaterThan(1);
        // Its pauses (250, 500 ms…) stop at the deadline: not an hour early, nor an hour late.
        expect(performance.now() - startedAt).toBeLessThan(60_000);
      } finally {
        stepped.mockRestore();
      }
    }
  });
});

describe.skipIf(databaseKind !== 'postgres')('a lock held past lock_timeout (PostgreSQL)', () => {
  it('is told apart, and the statement is tried again until the lock is given back', async () => {
    const scratch = await createScratchPostgresDatabase();
    const waiting = await openDatabase({ kind: 'postgres', url: scratch.url, poolMax: 1, timeouts: { statementMs: 30_000, lockMs: 200 } });
    let giveBack: (() => Promise<void>) | undefined;
    try {
      await waiting.db.execute(sql`create table migrating (id integer)`);
      giveBack = await holdTableLock(scratch.url, 'migrating');

      const blocked = await failure(() => waiting.db.execute(sql`select count(*) from migrating`));
      expect(databaseUnavailableReason(blocked)).toBe('database_locked');

      // Tried again only for the reasons asked for: a lock, when only an unreachable database is.
      let unreachableOnlyTries = 0;
      const notRetried = await failure(() =>
        retryWhileUnavailable(
          () => {
            unreachableOnlyTries += 1;
            return waiting.db.execute(sql`select count(*) from migrating`);
          },
          { until: performance.now() + 30_000, signal: never, reasons: ['database_unreachable'] },
        ),
      );
      expect(databaseUnavailableReason(notRetried)).toBe('database_locked');
      expect(unreachableOnlyTries).toBe(1);

      let tries = 0;
      const given = new Promise((resolve) => setTimeout(resolve, 1_000)).then(giveBack);
      const rows = await retryWhileUnavailable(
        () => {
          tries += 1;
          return queryRows<{ count: number }>(waiting.db, sql`select count(*)::integer as count from migrating`);
        },
        { until: performance.now() + 30_000, signal: never },
      );
      await given;
      expect(rows).toEqual([{ count: 0 }]);
      expect(tries).toBeGreaterThan(1);
    } finally {
      await giveBack?.();
      await waiting.close();
      await scratch.drop();
    }
  });
});
