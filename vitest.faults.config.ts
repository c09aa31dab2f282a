import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/**
 * The scenarios, longest first (seconds each took on a 2-core machine, two at a time): started in
 * this order, the two lanes end within a short scenario of each other. Vitest's own order with no
 * earlier run to go by is by file size, which left one lane running alone for over a minute.
 * A file not listed runs after these.
 */
const LONGEST_FIRST = [
  'outage-recovery', // 180
  'production-postgres-stop', // 176
  'worker-kill', // 176
  'production-outage-recovery', // 161
  'production-worker-kill', // 160
  'receiver-down', // 155
  'temporal-kill', // 149
  'production-temporal-kill', // 148
  'postgres-stop', // 144
  'production-worker-stall', // 126
  'production-api-kill', // 123
  'dead-waker', // 87
  'noisy-neighbour-many-projects', // 76
  'noisy-neighbour-many-webhooks', // 62
  'noisy-neighbour', // 58
  'api-kill', // 52
  'lost-retry-signal', // 45
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const index = LONGEST_FIRST.indexOf(path.basename(file.moduleId, '.test.ts'));
      return index === -1 ? LONGEST_FIRST.length : index;
    };
    return [...(await super.sort(files))].sort((a, b) => rank(a) - rank(b));
  }
}

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
    sequence: { sequencer: LongestFirst },
    testTimeout: 300_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    reporters: ['default'],
  },
});
