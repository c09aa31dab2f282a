#!/usr/bin/env node
// Finds promtool, Prometheus's checker of configs and alert rules, at the version of the Prometheus
// image in docker-compose.yml, building it into .tools/bin with `go install` when it is missing or
// of another version (go-tools.mjs). `npm run test:observability` runs this first.
//
//   node scripts/promtool.mjs     builds it if needed and prints its path
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureGoBinaries } from '../src/local/go-tools.mjs';

/**
 * Prometheus 3.16.0: its Go module numbers release 3.xx.y as v0.3xx.y. Built with the DNS service
 * discovery only (what the compose config uses; promtool itself also links Kubernetes'): the other
 * discovery plugins' cloud SDKs would more than double the cold build (about 9 minutes instead of
 * 3.5 on a shared 2-core machine).
 */
export const PROMTOOL_MODULE = {
  module: 'github.com/prometheus/prometheus',
  version: 'v0.316.0',
  binaries: { promtool: 'github.com/prometheus/prometheus/cmd/promtool' },
  tags: ['remove_all_sd', 'enable_dns_sd'],
};

/** The Prometheus release of {@link PROMTOOL_MODULE}, as its image is tagged: `v3.16.0`. */
export const PROMETHEUS_VERSION = PROMTOOL_MODULE.version.replace(/^v0\.3(\d\d)\./, (_, minor) => `v3.${Number(minor)}.`);

/**
 * promtool in .tools/bin at the pinned version, built first if needed (a few minutes, once).
 * @returns {string} its path
 */
export function ensurePromtool() {
  return ensureGoBinaries([PROMTOOL_MODULE]).promtool;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.error(`promtool: ${ensurePromtool()} (Prometheus ${PROMETHEUS_VERSION})`);
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
