#!/usr/bin/env node
// Finds the pinned Temporal binaries, building any that is missing (or of another version) into
// .tools/bin with `go install`, and keeps a copy of the server's SQL schemas in .tools/share.
//
// Its command is `scripts/temporal-tools.mjs`:
//   node scripts/temporal-tools.mjs            the CLI (`npm start` and `npm test` run this first)
//   node scripts/temporal-tools.mjs --cluster  also the server, temporal-sql-tool, the Web UI server
//                                              and the schemas (`npm run cluster -- up` runs this)
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { BIN_DIR, ensureGoBinaries, isExecutable, missingGoMessage, onPath, projectRoot } from './go-tools.mjs';

/**
 * The pinned Go modules and the binaries built from each. The server, the SQL tool and the UI
 * are the versions the CLI's dev server embeds (`temporal --version` says Server 1.29.1, UI 2.42.1),
 * so the dev server and the production topology run the same Temporal.
 */
export const TEMPORAL_MODULES = {
  cli: {
    module: 'github.com/temporalio/cli',
    version: 'v1.5.1',
    binaries: { temporal: 'github.com/temporalio/cli/cmd/temporal' },
  },
  server: {
    module: 'go.temporal.io/server',
    version: 'v1.29.1',
    binaries: {
      'temporal-server': 'go.temporal.io/server/cmd/server',
      'temporal-sql-tool': 'go.temporal.io/server/cmd/tools/sql',
    },
  },
  ui: {
    module: 'github.com/temporalio/ui-server/v2',
    version: 'v2.42.1',
    binaries: { 'temporal-ui-server': 'github.com/temporalio/ui-server/v2/cmd/server' },
  },
};

export const TEMPORAL_CLI_VERSION = TEMPORAL_MODULES.cli.version;
export const CACHED_CLI_PATH = path.join(BIN_DIR, 'temporal');

/** Where the server's PostgreSQL schemas (`temporal/`, `visibility/`) are kept, for temporal-sql-tool. */
export const TEMPORAL_SCHEMA_DIR = path.join(
  projectRoot,
  '.tools',
  'share',
  `temporal-server-${TEMPORAL_MODULES.server.version}`,
  'schema',
  'postgresql',
  'v12',
);

/**
 * The Temporal CLI to use: `explicitPath` (TEMPORAL_CLI_PATH) if given, else `temporal`
 * on PATH, else the cached build in .tools/bin; undefined when there is none.
 * @param {string | undefined} explicitPath
 * @returns {string | undefined}
 */
export function findTemporalCli(explicitPath) {
  if (explicitPath) {
    if (!isExecutable(explicitPath)) throw new Error(`TEMPORAL_CLI_PATH=${explicitPath} is not an executable file`);
    return explicitPath;
  }
  return onPath('temporal') ?? (isExecutable(CACHED_CLI_PATH) ? CACHED_CLI_PATH : undefined);
}

/** Copies the server module's PostgreSQL schemas out of the Go module cache (read-only there). */
function copySchemas(go) {
  if (existsSync(TEMPORAL_SCHEMA_DIR)) return;
  const { module, version } = TEMPORAL_MODULES.server;
  const { Dir } = JSON.parse(execFileSync(go, ['mod', 'download', '-json', `${module}@${version}`], { encoding: 'utf8' }));
  const source = path.join(Dir, 'schema', 'postgresql', 'v12');
  const staging = `${TEMPORAL_SCHEMA_DIR}.partial`;
  rmSync(staging, { recursive: true, force: true });
  cpSync(source, staging, { recursive: true });
  makeWritable(staging);
  renameSync(staging, TEMPORAL_SCHEMA_DIR);
}

function makeWritable(dir) {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) makeWritable(file);
    else chmodSync(file, 0o644);
  }
}

/**
 * Makes sure the given modules' binaries are in .tools/bin at their pinned versions (and, with
 * `server`, the schemas in {@link TEMPORAL_SCHEMA_DIR}), building what is missing.
 * @param {(keyof typeof TEMPORAL_MODULES)[]} keys
 * @returns {Record<string, string>} binary name -> path
 */
export function ensureTemporalTools(keys) {
  const specs = keys.map((key) => TEMPORAL_MODULES[key]);
  const paths = ensureGoBinaries(specs);
  if (keys.includes('server') && !existsSync(TEMPORAL_SCHEMA_DIR)) {
    const go = onPath('go');
    if (!go) throw new Error(missingGoMessage(specs));
    copySchemas(go);
  }
  return paths;
}

/**
 * Builds the pinned CLI into .tools/bin with `go install` (a few minutes the first time).
 * @returns {string | undefined} the binary, or undefined when Go is missing or the build failed
 */
export function buildTemporalCli() {
  try {
    return ensureTemporalTools(['cli']).temporal;
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    return undefined;
  }
}

/**
 * The command: with `--cluster` in `args`, every binary of the production topology and the
 * schemas; otherwise the CLI. Exits with 1 when a cluster binary cannot be had.
 * @param {string[]} args
 */
export function main(args) {
  if (args.includes('--cluster')) {
    try {
      const paths = ensureTemporalTools(['cli', 'server', 'ui']);
      for (const [name, file] of Object.entries(paths)) console.error(`${name}: ${file}`);
      console.error(`schemas: ${TEMPORAL_SCHEMA_DIR}`);
    } catch (error) {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    }
  } else {
    const found = findTemporalCli(process.env.TEMPORAL_CLI_PATH) ?? buildTemporalCli();
    if (found) {
      const version = execFileSync(found, ['--version'], { encoding: 'utf8' }).trim();
      console.error(`Temporal CLI: ${found} (${version})`);
    } else {
      console.error(
        'No Temporal CLI found and it could not be built. The service will try the download that ' +
          '@temporalio/testing does (needs internet). Otherwise install Go >= 1.25 and rerun, or install ' +
          'the Temporal CLI (https://docs.temporal.io/cli) and put it on PATH or in TEMPORAL_CLI_PATH.',
      );
    }
  }
}
