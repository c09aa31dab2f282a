import path from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startClusterTopology, type ClusterHandle } from '../support/cluster.ts';
import { preparedReleaseDir, previousRelease, runReleaseCli, type Release } from '../support/releases.ts';
import { bundleCurrentWorkflows, runUpgradeScenario, startScenarioReceiver, type UpgradeTopology } from './scenario.ts';

/*
 * The upgrade of test/upgrade/scenario.ts on the production topology (`npm run cluster`: the
 * Temporal server and the service's database on Debian's PostgreSQL, two API and two worker
 * replicas). The previous release's `npm run cluster -- down` stops it (replicas first, then the
 * Temporal server and PostgreSQL), and the working tree's `up` starts it again on the same
 * DATA_DIR: PostgreSQL's data, Temporal's persistence and visibility databases are kept; the new
 * replicas migrate the service's schema and take over the open workflows.
 *
 * Old and new replicas do not run side by side here: from 0.2.0 an upgrade stops every old
 * replica first (docs/operators.md, "Upgrading the service", says why).
 */

const projectRoot = path.resolve(import.meta.dirname, '../..');

let release: Release;
let releaseDir: string;
let workflowBundle: { code: string };
let receiver: Awaited<ReturnType<typeof startScenarioReceiver>>;
let cluster: ClusterHandle | undefined;

beforeAll(async () => {
  release = previousRelease();
  releaseDir = preparedReleaseDir(release);
  workflowBundle = await bundleCurrentWorkflows();
  receiver = await startScenarioReceiver();
}, 300_000);
afterAll(async () => {
  await cluster?.destroy();
  await receiver?.close();
});

/** The production topology in one DATA_DIR, driven by the old release's `npm run cluster`, then by the working tree's. */
function productionTopology(): UpgradeTopology {
  const handle = () => {
    if (!cluster) throw new Error('the topology has not been started');
    return cluster;
  };
  return {
    api: () => handle().status.api[0]!,
    temporalAddress: () => handle().status.temporal,
    oldCli: (args) => runReleaseCli(releaseDir, { ...handle().env, DATABASE_URL: handle().status.postgres }, args),
    async startOld(settings) {
      cluster = await startClusterTopology({ name: 'upgrade', env: settings, root: releaseDir });
    },
    async stopOld() {
      const stopped = await handle().cli(['down']);
      if (stopped.code !== 0) throw new Error(`the old release's npm run cluster -- down failed (${stopped.code}):\n${stopped.stderr}`);
    },
    async startNew() {
      handle().driveWith(projectRoot);
      await handle().up();
    },
    logs: () => ['api-0', 'worker-0', 'worker-1'].map((name) => `${name}:\n${handle().log(name).trimEnd().split('\n').slice(-15).join('\n')}`).join('\n'),
  };
}

describe('upgrading from the previous release with deliveries in flight (production topology)', () => {
  it('ends every delivery delivered on the new replicas: dead letters retried by hand, retries, waits at a busy endpoint, a running bulk retry', async () => {
    await runUpgradeScenario(productionTopology(), { release, receiver, workflowBundle });
  });
});
