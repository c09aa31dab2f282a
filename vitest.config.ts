import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'test/cluster/**', 'test/schemathesis/**', 'test/helm/**', 'test/observability/**', 'test/upgrade/**', 'test/compose/**'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Files mostly wait (on retry backoffs, servers, timers) rather than compute: two at a time
    // even on a two-core machine, where vitest's default (one fewer than the cores) runs one.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
