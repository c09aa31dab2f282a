import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { WORKFLOWS_PATH } from '../../src/temporal/worker.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    faultsWorkflowBundlePath: string;
  }
}

/**
 * Bundles the workflow code once for the fault suite, as the Dockerfile does for production
 * (WORKFLOW_BUNDLE_PATH), so worker processes start and restart without compiling it.
 */
export default async function setup(project: TestProject) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'webhooks-faults-bundle-'));
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: new DefaultLogger('WARN') });
  await writeFile(bundlePath, code);
  project.provide('faultsWorkflowBundlePath', bundlePath);
  return async () => {
    await rm(dir, { recursive: true, force: true });
  };
}
