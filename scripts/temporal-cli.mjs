#!/usr/bin/env node
// Finds the Temporal CLI, building the pinned version into .tools/bin when it is missing.
// `npm start` and `npm test` run this first; run it alone to provision the CLI.
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CACHED_CLI_PATH = path.join(projectRoot, '.tools', 'bin', 'temporal');

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(command) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, command))) return path.join(dir, command);
  }
  return undefined;
}

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

/**
 * Builds the pinned CLI into .tools/bin with `go install` (a few minutes the first time).
 * @returns {string | undefined} the binary, or undefined when Go is missing or the build failed
 */
export function buildTemporalCli() {
  const go = onPath('go');
  if (!go) return undefined;
  console.error(`Building the Temporal CLI ${TEMPORAL_CLI_VERSION} into .tools/bin (first run only; takes a few minutes)…`);
  const result = spawnSync(go, ['install', `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`], {
    env: { ...process.env, GOBIN: path.dirname(CACHED_CLI_PATH), GOFLAGS: '-mod=mod' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return result.status === 0 && isExecutable(CACHED_CLI_PATH) ? CACHED_CLI_PATH : undefined;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
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
