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
    // The files of a worker share its process and module cache: each file importing the SDK, the
    // database drivers and the app again took 116 of the run's 837 s here (collect), against 17 s
    // shared (the whole run: 673 s). No file changes process.env or module state another reads;
    // the Temporal runtime is the one process-wide singleton (see test/tracing/tracing.test.ts).
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
