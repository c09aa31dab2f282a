/**
 * A statement that fails because its database cannot be reached is told apart from one that
 * fails for what it asks, and is tried again until the database is back: on a real server (the
 * embedded PGlite server, over the PostgreSQL wire protocol) stopped and started again on its port.
 */
import { sql } from 'drizzle-orm';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnreachable, openDatabase, queryRows, retryWhileUnreachable, type DatabaseHandle } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/local/embedded-database.ts';
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
    expect(isDatabaseUnreachable(refused)).toBe(false);

    await server!.stop();
    server = undefined;
    const down = await failure(() => handle.db.execute(sql`select 1`));
    expect(isDatabaseUnreachable(down)).toBe(true);
  });

  it('is tried again until it is back, and the statement then runs', async () => {
    let tries = 0;
    const back = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      server = await startEmbeddedPostgres(dataDir(), port);
    })();
    const rows = await retryWhileUnreachable(
      () => {
        tries += 1;
        return queryRows<{ one: number }>(handle.db, sql`select 1 as one`);
      },
      { until: Date.now() + 60_000, signal: never },
    );
    await back;
    expect(rows).toEqual([{ one: 1 }]);
    expect(tries).toBeGreaterThan(1);
  });

  it('is tried again only until the deadline, and a statement that fails for what it asked is not tried again', async () => {
    let failingTries = 0;
    const refused = await failure(() =>
      retryWhileUnreachable(
        () => {
          failingTries += 1;
          return handle.db.execute(sql`select * from no_such_table`);
        },
        { until: Date.now() + 60_000, signal: never },
      ),
    );
    expect(isDatabaseUnreachable(refused)).toBe(false);
    expect(failingTries).toBe(1);

    await server!.stop();
    server = undefined;
    let tries = 0;
    const startedAt = Date.now();
    const down = await failure(() =>
      retryWhileUnreachable(
        () => {
          tries += 1;
          return handle.db.execute(sql`select 1`);
        },
        { until: startedAt + 2_000, signal: never },
      ),
    );
    expect(isDatabaseUnreachable(down)).toBe(true);
    expect(tries).toBeGreaterThan(1);
  });

  it('is not tried again once the signal aborts', async () => {
    const stopping = new AbortController();
    stopping.abort();
    let tries = 0;
    const down = await failure(() =>
      retryWhileUnreachable(
        () => {
          tries += 1;
          return handle.db.execute(sql`select 1`);
        },
        { until: Date.now() + 60_000, signal: stopping.signal },
      ),
    );
    expect(isDatabaseUnreachable(down)).toBe(true);
    expect(tries).toBe(1);
  });
});
