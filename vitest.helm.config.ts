import { defineConfig } from 'vitest/config';

/**
 * The Helm chart's offline checks (`npm run test:helm`): helm lint and template, and the rendered
 * objects validated against the Kubernetes API schemas, run once in CI rather than with each run
 * of the quick suite. No Temporal server, no database.
 */
export default defineConfig({
  test: {
    include: ['test/helm/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    // The first run builds helm with Go and installs kubernetes-validate (scripts/helm-tools.mjs).
    hookTimeout: 900_000,
    reporters: ['default'],
  },
});
