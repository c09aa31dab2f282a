import { defineConfig } from 'vitest/config';

/**
 * The production topology's suite (`npm run test:cluster`): each file brings up `npm run cluster`
 * (PostgreSQL, the Temporal server, the Web UI, API and worker replicas) in a DATA_DIR of its own.
 * It needs the cluster's binaries (`node scripts/temporal-tools.mjs --cluster`) and Debian's
 * PostgreSQL; files run one at a time.
 */
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 600_000,
    teardownTimeout: 120_000,
    reporters: ['default'],
  },
});
