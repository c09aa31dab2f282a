import { defineConfig } from 'vitest/config';

/**
 * The upgrade suite (`npm run test:upgrade`): the previous release (releases.json) runs from its
 * own code with deliveries in flight, then the working tree takes over its data. Each file starts
 * its own processes; files run one at a time; no globalSetup of the quick suite.
 */
export default defineConfig({
  test: {
    include: ['test/upgrade/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 300_000,
    teardownTimeout: 60_000,
    reporters: ['default'],
  },
});
