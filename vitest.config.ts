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
    // The files of a worker share its process and module cache. When each file imported the SDK,
    // the database drivers and the app again, the imports took 116 s of the workers' time and the
    // run 837 s on PGlite here; shared, 17 s and 673 s. No file changes process.env or module
    // state another reads; the Temporal runtime is the one process-wide singleton (see
    // test/tracing/tracing.test.ts).
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
