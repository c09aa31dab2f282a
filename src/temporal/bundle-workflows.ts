// Bundles the workflow code ahead of time, so production workers start without compiling
// (`npm run build:workflows`: into WORKFLOW_BUNDLE_PATH, and the bundle with tracing's workflow
// interceptors beside it), and for a worker that finds no prebuilt bundle
// (`src/temporal/bundle-workflows.ts <file> [--tracing]`): that worker runs this in a short-lived
// child process so that webpack's memory never stays in the worker's own.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../config.ts';
import { tracingBundlePath, workflowBundleOptions } from './worker.ts';

async function bundle(target: string, tracing: boolean, quiet: boolean): Promise<void> {
  const { code } = await bundleWorkflowCode({ ...workflowBundleOptions(tracing), ...(quiet ? { logger: new DefaultLogger('WARN') } : {}) });
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, code);
  if (!quiet) console.log(`wrote ${target} (${(code.length / 1024).toFixed(0)} KiB)`);
}

const [file] = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
if (file) {
  await bundle(file, process.argv.includes('--tracing'), true);
} else {
  const target = loadConfig().temporal.workflowBundlePath;
  await bundle(target, false, false);
  await bundle(tracingBundlePath(target), true, false);
}
