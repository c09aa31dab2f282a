/**
 * The embedded database process, forked by `spawnEmbeddedPostgres` with its
 * {@link EmbeddedServerArgs} as argument. It serves the database, tells its parent the URL
 * (or why it could not), and closes it cleanly when the IPC channel closes: when the parent
 * calls `stop()`, and when the parent dies, even by SIGKILL. Ctrl-C reaches the whole
 * terminal process group; this process ignores it and lets the parent drain first.
 * With `createOnly` it creates the database files, reports `created` and exits.
 */
import {
  createEmbeddedDatabase,
  startEmbeddedPostgres,
  type EmbeddedServerArgs,
  type EmbeddedServerMessage,
} from './embedded-database.ts';

const args = JSON.parse(process.argv[2] ?? '{}') as EmbeddedServerArgs;
/** Sends a message to the parent; resolves once it is written (or at once if the parent is gone). */
const tell = (message: EmbeddedServerMessage) =>
  new Promise<void>((resolve) => (process.connected ? process.send!(message, () => resolve()) : resolve()));

process.on('SIGINT', () => {});
try {
  if ('createOnly' in args) {
    await createEmbeddedDatabase(args.dataDir);
    await tell({ type: 'created' });
    process.exit(0);
  }
  const server = await startEmbeddedPostgres(args.dataDir, args.port);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    server.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('the embedded database did not close cleanly:', error);
        process.exit(1);
      },
    );
  };
  process.once('disconnect', stop);
  process.once('SIGTERM', stop);
  await tell({ type: 'ready', url: server.url });
  if (!process.connected) stop(); // the parent went away while the database was opening
} catch (error) {
  await tell({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
  process.exit(1);
}
