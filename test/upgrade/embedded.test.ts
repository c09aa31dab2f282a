import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { embeddedEnv, freePorts, killStarted, lastLines, startService, waitForExit, waitForReady, type GroupProcess } from '../support/embedded-service.ts';
import { preparedReleaseDir, previousRelease, runReleaseCli, startRelease, type Release } from '../support/releases.ts';
import { bundleCurrentWorkflows, runUpgradeScenario, startScenarioReceiver, type UpgradeTopology } from './scenario.ts';

/*
 * The upgrade of test/upgrade/scenario.ts on the embedded stack (`npm start`: PGlite and the
 * Temporal dev server, both keeping their data in DATA_DIR): the previous release's process is
 * stopped with SIGTERM, as a terminal's user or a deploy stops it, and the working tree's starts
 * on the same DATA_DIR.
 */

/** The old release's SIGTERM drains its sends, a hanging one up to DELIVERY_TIMEOUT_MS (30 s). */
const OLD_RELEASE_STOP_MS = 90_000;

let tmp: string;
let release: Release;
let releaseDir: string;
let workflowBundle: { code: string };
let receiver: Awaited<ReturnType<typeof startScenarioReceiver>>;

beforeAll(async () => {
  release = previousRelease();
  releaseDir = preparedReleaseDir(release);
  workflowBundle = await bundleCurrentWorkflows();
  tmp = await mkdtemp(path.join(os.tmpdir(), 'upgrade-'));
  receiver = await startScenarioReceiver();
}, 300_000);
afterEach(killStarted);
afterAll(async () => {
  await receiver?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** The embedded stack on fixed ports and one DATA_DIR, run by the old release, then by the working tree. */
async function embeddedTopology(): Promise<UpgradeTopology & { stopNew(): Promise<void> }> {
  const ports = await freePorts();
  let env: NodeJS.ProcessEnv = {};
  let running: GroupProcess | undefined;
  return {
    api: () => `http://127.0.0.1:${ports.api}`,
    temporalAddress: () => `127.0.0.1:${ports.temporal}`,
    oldCli: (args) => runReleaseCli(releaseDir, env, args),
    async startOld(settings) {
      env = { ...embeddedEnv(path.join(tmp, 'data'), ports), ...settings };
      running = startRelease(releaseDir, env);
      await waitForReady(running, ports.api);
    },
    async stopOld() {
      running!.child.kill('SIGTERM');
      expect(await waitForExit(running!, OLD_RELEASE_STOP_MS)).toMatchObject({ code: 0 });
    },
    async startNew() {
      running = startService(env);
      await waitForReady(running, ports.api);
    },
    async stopNew() {
      running!.child.kill('SIGTERM');
      expect(await waitForExit(running!)).toMatchObject({ code: 0 });
    },
    logs: () => lastLines(running?.output() ?? ''),
  };
}

describe('upgrading from the previous release with deliveries in flight (embedded stack)', () => {
  it('ends every delivery delivered on the new code: dead letters retried by hand, retries, waits at a busy endpoint, a running bulk retry', async () => {
    const topology = await embeddedTopology();
    await runUpgradeScenario(topology, { release, receiver, workflowBundle });
    await topology.stopNew();
  });
});
