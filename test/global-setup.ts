import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { parseConfig } from '../src/config.ts';
import { startDevServer } from '../src/local/dev-server.ts';
import { WORKFLOWS_PATH } from '../src/temporal/worker.ts';
import { freePort } from './support/ports.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    workflowBundlePath: string;
  }
}

/**
 * One real Temporal server and one workflow bundle for the whole run: the Temporal server at
 * TEMPORAL_ADDRESS when it is set (for example the production topology of `npm run cluster`,
 * whose bootstrap registered the namespace and search attributes), else a dev server in memory.
 */
export default async function setup(project: TestProject) {
  const config = parseConfig(process.env);
  const [server, bundle] = await Promise.all([
    config.temporal.address
      ? { address: config.temporal.address, stop: async () => {} }
      : startDevServer({
          cliPath: config.temporal.cliPath,
          stateDir: undefined,
          port: await freePort(),
          uiPort: undefined,
          namespace: config.temporal.namespace,
        }),
    bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: undefined }),
  ]);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'webhooks-test-'));
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  await writeFile(bundlePath, bundle.code);
  project.provide('temporalAddress', server.address);
  project.provide('workflowBundlePath', bundlePath);
  return async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
