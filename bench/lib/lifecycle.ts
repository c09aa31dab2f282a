/**
 * What a run starts is stopped on exit, on errors and on Ctrl-C: cleanup steps run in reverse
 * order, and process groups that outlive them are killed as a last resort.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { options } from './options.ts';
import { killGroup } from './stack.ts';

const cleanups: (() => Promise<unknown>)[] = [];
const groupsToKill = new Set<number>();
let interrupted = false;

/** The run's temporary folder (DATA_DIR, certificate, logs), removed at the end unless --keep. */
export const workDir = mkdtempSync(path.join(options.stateDir ? path.resolve(options.stateDir) : os.tmpdir(), 'webhook-bench-'));

/** True once Ctrl-C (or SIGTERM) asked the run to stop. */
export const isInterrupted = () => interrupted;

/** Adds a cleanup step (run last-added first). */
export function onCleanup(step: () => Promise<unknown>): void {
  cleanups.push(step);
}

/** Kills this process group with SIGKILL if the bench exits without cleaning up. */
export function killOnExit(pid: number): void {
  groupsToKill.add(pid);
}

/** Runs every cleanup step, then removes the work folder (unless --keep). */
export async function cleanup(): Promise<void> {
  while (cleanups.length > 0) {
    const step = cleanups.pop()!;
    await step().catch((error: unknown) => console.error('cleanup:', error));
  }
  if (!options.keep) rmSync(workDir, { recursive: true, force: true });
  else console.error(`kept ${workDir}`);
}

process.on('exit', () => {
  // Last resort (an exit without cleanup): no child outlives the bench.
  for (const pid of groupsToKill) killGroup(pid, 'SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) {
      console.error('\nforced exit');
      process.exit(130);
    }
    interrupted = true;
    console.error(`\n${signal}: stopping the service and the receiver (again to force)...`);
    void cleanup().finally(() => process.exit(130));
  });
}
