import { defineConfig } from 'vitest/config';

/**
 * The Docker Compose suite (`npm run test:compose`): the README's compose commands, run as written
 * on podman with images made on this machine (test/compose). One file; its steps build on each
 * other; no globalSetup of the quick suite.
 */
export default defineConfig({
  test: {
    include: ['test/compose/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 1_800_000,
    teardownTimeout: 120_000,
    reporters: ['default'],
  },
});
