import { defineConfig } from 'vitest/config';

/**
 * The upgrade suite (`npm run test:upgrade`): the previous release (releases.json) runs from its
 * own code with deliveries in flight, then the working tree takes over its data. Each file starts
 * its own processes on ports and data directories of its own, so the two run at once (their
 * scenarios mostly wait on backoffs and restarts); the global set-up installs the release they
 * share, once. Not the quick suite's global set-up.
 */
export default defineConfig({
  test: {
    include: ['test/upgrade/**/*.test.ts'],
    pool: 'forks',
    globalSetup: ['test/upgrade/global-setup.ts'],
    maxWorkers: 2,
    testTimeout: 600_000,
    hookTimeout: 300_000,
    teardownTimeout: 60_000,
    reporters: ['default'],
  },
});
