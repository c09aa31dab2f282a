import type { Config } from '../config.ts';
import { openDatabase, pingDatabase, type DatabaseHandle } from '../db/client.ts';
import { CliError } from './output.ts';

/**
 * The service's database, for admin commands: DATABASE_URL, or in the embedded mode the
 * PGlite database that a running `npm start` serves on 127.0.0.1:PGLITE_PORT.
 */
export async function connectDatabase(config: Config): Promise<DatabaseHandle> {
  const url =
    config.database.kind === 'postgres'
      ? config.database.url
      : `postgres://postgres@127.0.0.1:${config.database.port}/postgres`;
  const handle = await openDatabase({ kind: 'postgres', url, poolMax: 2 });
  try {
    await pingDatabase(handle.db);
  } catch (error) {
    await handle.close();
    throw new CliError(
      config.database.kind === 'postgres'
        ? `cannot reach the database at DATABASE_URL: ${(error as Error).message}`
        : `cannot reach the embedded database on 127.0.0.1:${config.database.port}: start the service with \`npm start\` first, or set DATABASE_URL`,
    );
  }
  return handle;
}
