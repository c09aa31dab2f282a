import { defineConfig } from 'vitest/config';

/**
 * The fault suite (`npm run test:faults`): each file starts its own Postgres, Temporal dev
 * server, API and worker processes and damages one of them mid-run. Files run one at a
 * time (they are CPU-heavy and measure recovery times); no globalSetup of the quick suite.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/faults/global-setup.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    reporters: ['default'],
  },
});
