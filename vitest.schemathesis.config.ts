import { defineConfig } from 'vitest/config';

/**
 * The OpenAPI property-based test (`npm run test:schemathesis`): Schemathesis against the
 * served document, run once in CI rather than with each run of the quick suite. The quick
 * suite's globalSetup provides the Temporal server and workflow bundle.
 */
export default defineConfig({
  test: {
    include: ['test/schemathesis/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 600_000,
    // The first run installs Schemathesis (scripts/schemathesis.mjs).
    hookTimeout: 300_000,
    reporters: ['default'],
  },
});
