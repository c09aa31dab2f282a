import { defineConfig } from 'vitest/config';

/**
 * The observability suite (`npm run test:observability`): the Prometheus config and alert rules
 * checked and unit-tested by promtool (`node scripts/promtool.mjs` builds it), and the Grafana
 * dashboard's and the rules' queries checked against the metrics the service's API and worker
 * processes really serve. Run once in CI, not in each run of the main suite.
 */
export default defineConfig({
  test: {
    include: ['test/observability/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
