#!/usr/bin/env node
// Builds the OpenTelemetry Collector of the tracing tests and benchmark (OTLP receiver, file
// exporter) from deploy/observability/collector/builder.yaml with the Collector builder (ocb),
// both pinned, and caches it in .tools/bin. A stamp beside the binary holds the hash of the
// manifest and the builder's version: a change to either rebuilds it.
//
//   node scripts/otel-collector.mjs     build it unless current, print its path (CI runs this)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN_DIR, ensureGoBinaries, isExecutable, missingGoMessage, onPath, projectRoot } from '../src/local/go-tools.mjs';

/** The Collector builder (ocb), pinned; its version goes with the components' in the manifest. */
const COLLECTOR_BUILDER = {
  module: 'go.opentelemetry.io/collector/cmd/builder',
  version: 'v0.165.0',
  binaries: { 'otelcol-builder': 'go.opentelemetry.io/collector/cmd/builder' },
};

/** The builder manifest: which components the collector is made of. */
const COLLECTOR_MANIFEST = path.join(projectRoot, 'deploy', 'observability', 'collector', 'builder.yaml');
/** The built collector. */
const COLLECTOR_PATH = path.join(BIN_DIR, 'otelcol-webhooks');
const STAMP_PATH = `${COLLECTOR_PATH}.stamp`;

/** What the cached binary must have been built from. */
function wantedStamp() {
  return createHash('sha256').update(readFileSync(COLLECTOR_MANIFEST)).update(COLLECTOR_BUILDER.version).digest('hex');
}

/** True when the cached collector was built from the current manifest by the pinned builder. */
function isCollectorCurrent() {
  return isExecutable(COLLECTOR_PATH) && existsSync(STAMP_PATH) && readFileSync(STAMP_PATH, 'utf8').trim() === wantedStamp();
}

/**
 * Makes sure .tools/bin holds the collector built from the current manifest, building the
 * builder and then the collector when not (a few minutes the first time: Go modules to fetch).
 * @returns {string} the collector's path
 */
export function ensureCollector() {
  if (isCollectorCurrent()) return COLLECTOR_PATH;
  if (!onPath('go')) throw new Error(missingGoMessage([COLLECTOR_BUILDER]));
  const builder = ensureGoBinaries([COLLECTOR_BUILDER])['otelcol-builder'];
  // The manifest's output_path, relative to the root.
  const scratch = path.join(projectRoot, '.tools', 'build', 'otelcol-webhooks');
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  console.error(`Building the OpenTelemetry Collector from ${path.relative(projectRoot, COLLECTOR_MANIFEST)} into .tools/bin; a few minutes the first time…`);
  // The builder's `go mod tidy` also fetches the modules that only the components' own tests
  // import; the module mirror of our build machines refuses some of them (403). GOFLAGS=-e lets
  // tidy go on without them (the binary needs none); `go build` ignores the flag.
  const result = spawnSync(builder, [`--config=${COLLECTOR_MANIFEST}`], {
    cwd: projectRoot,
    env: { ...process.env, GOFLAGS: '-e' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (result.status !== 0) throw new Error(`the Collector builder failed (exit ${result.status ?? result.signal})`);
  renameSync(path.join(scratch, 'otelcol-webhooks'), COLLECTOR_PATH);
  writeFileSync(STAMP_PATH, `${wantedStamp()}\n`);
  rmSync(scratch, { recursive: true, force: true });
  return COLLECTOR_PATH;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.error(`OpenTelemetry Collector: ${ensureCollector()}`);
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
