// Bundles the workflow code ahead of time, so production workers start without compiling
// (`npm run build:workflows`, into WORKFLOW_BUNDLE_PATH), and for a worker that finds no
// prebuilt bundle (`tsx scripts/bundle-workflows.ts <file>`): that worker runs this in a
// short-lived child process so that webpack's memory never stays in the worker's own.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { WORKFLOWS_PATH } from '../src/worker.ts';

const target = process.argv[2] ?? loadConfig().temporal.workflowBundlePath;
const quiet = process.argv[2] !== undefined;
const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, ...(quiet ? { logger: new DefaultLogger('WARN') } : {}) });
await mkdir(path.dirname(target), { recursive: true });
await writeFile(target, code);
if (!quiet) console.log(`wrote ${target} (${(code.length / 1024).toFixed(0)} KiB)`);
