/**
 * The production topology as a fault scenario's deployment: `npm run cluster -- up` (PostgreSQL,
 * the Temporal server on it, two API and two worker replicas) in a DATA_DIR of the scenario's
 * own, on free ports. The scenario damages it through the topology handle and repairs it the
 * way an operator would: `npm run cluster -- up` starts again what is not running.
 */
import { existsSync } from 'node:fs';
import { inject } from 'vitest';
import { openDatabase } from '../../src/db/client.ts';
import { startClusterTopology, type ClusterHandle, type ClusterRole } from '../support/cluster.ts';
import { FAULT_SCENARIO_QUOTA, STATE_PARENT } from './cluster.ts';
import { createScenarioKeys, type Deployment } from './workload.ts';


export interface ProductionCluster extends Deployment {
  readonly topology: ClusterHandle;
  /** Marks a process the scenario stops on purpose (it does not count as an unexpected exit). */
  damaged(role: ClusterRole, index?: number): void;
  /** `npm run cluster -- up`: starts again what is not running; the damaged processes count as repaired. */
  repair(): Promise<void>;
  stop(): Promise<void>;
}

export async function startProductionCluster(name: string, caFile: string, extraEnv: Record<string, string> = {}): Promise<ProductionCluster> {
  const bundle = inject('faultsWorkflowBundlePath');
  const topology = await startClusterTopology({
    name,
    stateParent: STATE_PARENT,
    env: {
      DELIVERY_CA_FILE: caFile,
      DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
      LOG_LEVEL: 'warn',
      // Prebuilt as the Dockerfile does, so worker replicas start without bundling.
      ...(bundle && existsSync(bundle) ? { WORKFLOW_BUNDLE_PATH: bundle } : {}),
      ...FAULT_SCENARIO_QUOTA,
      ...extraEnv,
    },
  });
  const database = await openDatabase({ kind: 'postgres', url: topology.status.postgres, poolMax: 4 });
  const expectedDown = new Set<string>();
  return {
    topology,
    apiUrls: topology.status.api,
    db: database.db,
    createKey: () => createScenarioKeys(database.db, `prj_${name}_${Math.random().toString(36).slice(2, 10)}`),
    damaged(role, index = 0) {
      expectedDown.add(`${role} ${index}`);
    },
    async repair() {
      await topology.up();
      expectedDown.clear();
    },
    async unexpectedExits() {
      const status = await topology.refresh();
      return status.stopped
        .filter(({ role, index }) => !expectedDown.has(`${role} ${index}`))
        .map(({ role, index }) => `${role} ${index} is not running; its log ends:\n${topology.log(`${role}-${index}`).split('\n').slice(-15).join('\n')}`);
    },
    async stop() {
      await database.close();
      const result = await topology.destroy();
      if (result.code !== 0) throw new Error(`npm run cluster -- down failed: ${result.stderr}`);
    },
  };
}
