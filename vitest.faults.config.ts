import { defineConfig } from 'vitest/config';

/**
 * The fault suite (`npm run test:faults`): each file starts its own Postgres, Temporal dev
 * server (or production topology), API and worker processes and damages one of them mid-run.
 * Two files run at a time: a scenario spends most of its time waiting (on timeouts, backoffs
 * and restarts), and each owns its ports, data directory and receiver, so nothing is shared.
 * The recovery times a scenario reports are then those of a machine running two; for figures
 * to quote, run it one file at a time: `npm run test:faults -- --no-file-parallelism`.
 * Its global set-up is its own (test/faults/global-setup.ts: the workflow bundle, made once for
 * every worker process the scenarios start), not the quick suite's.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/faults/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 300_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    reporters: ['default'],
  },
});
