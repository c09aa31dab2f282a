import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { mkdir } from 'node:fs/promises';

/** A PGlite database served over the Postgres wire protocol on a loopback port. */
export interface EmbeddedPostgres {
  /** Connection URL for postgres.js, psql or drizzle-kit. */
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Opens the PGlite database in `dataDir` and serves it on `127.0.0.1:port`.
 *
 * PGlite is a single-session database. Every client, the service's own pool included,
 * connects through this one socket server: its multiplexer runs one query at a time and,
 * while a client has a transaction open, runs only that client's queries, so each
 * transaction stays isolated from every other client.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number): Promise<EmbeddedPostgres> {
  await mkdir(dataDir, { recursive: true });
  const db = await PGlite.create(dataDir);
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port, maxConnections: 100 });
  try {
    await server.start();
  } catch (error) {
    await db.close();
    throw new Error(
      `cannot serve the embedded database on 127.0.0.1:${port} (is another instance running? set PGLITE_PORT): ${String(error)}`,
    );
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      await server.stop();
      await db.close();
    },
  };
}
