/**
 * A Temporal dev server of a test file's own, for a test that changes the server's settings or
 * stops it; the run's server (test/global-setup.ts) is shared with the other files.
 */
import { parseConfig } from '../../src/config.ts';
import { startDevServer, type DevServer } from '../../src/local/dev-server.ts';
import { freePort } from './ports.ts';

/** Starts a dev server on a free port, in memory, with `extraArgs` added to its command line. */
export async function startOwnDevServer(extraArgs: string[] = []): Promise<DevServer> {
  const { temporal } = parseConfig(process.env);
  return startDevServer({ cliPath: temporal.cliPath, stateDir: undefined, port: await freePort(), uiPort: undefined, namespace: temporal.namespace, extraArgs });
}
