// Bundles the workflow code ahead of time, so production workers start without compiling.
import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { WORKFLOWS_PATH } from '../src/worker.ts';

const target = loadConfig().temporal.workflowBundlePath;
const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH });
await mkdir(path.dirname(target), { recursive: true });
await writeFile(target, code);
console.log(`wrote ${target} (${(code.length / 1024).toFixed(0)} KiB)`);
