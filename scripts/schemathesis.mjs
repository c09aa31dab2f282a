#!/usr/bin/env node
// Installs the pinned Schemathesis (the OpenAPI property-based tester of `npm run test:schemathesis`)
// into a Python virtual environment in .tools/schemathesis-<version>, once: later runs find the
// finished install (its marker names the pinned requirements) and return at once.
//
//   node scripts/schemathesis.mjs   installs if needed, then prints the path of the `schemathesis` command
//
// Needs `python3` (or the Python named by PYTHON) >= 3.11 with the venv module (Debian: apt-get
// install python3-venv) and, on the first run only, the Python package index (pip's own settings).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const SCHEMATHESIS_VERSION = '4.32.5';
/** Schemathesis and its dependencies, every version pinned. */
export const SCHEMATHESIS_REQUIREMENTS = path.join(projectRoot, 'scripts', 'schemathesis-requirements.txt');
export const SCHEMATHESIS_VENV = path.join(projectRoot, '.tools', `schemathesis-${SCHEMATHESIS_VERSION}`);
export const SCHEMATHESIS_BIN = path.join(SCHEMATHESIS_VENV, 'bin', 'schemathesis');
const MARKER = path.join(SCHEMATHESIS_VENV, '.installed');
const MIN_PYTHON = [3, 11];

function requirementsDigest() {
  return createHash('sha256').update(readFileSync(SCHEMATHESIS_REQUIREMENTS)).digest('hex');
}

function installed() {
  return existsSync(SCHEMATHESIS_BIN) && existsSync(MARKER) && readFileSync(MARKER, 'utf8').trim() === requirementsDigest();
}

/** `python3` (or PYTHON), checked for the version Schemathesis needs and for the venv module. */
function findPython() {
  const python = process.env.PYTHON || 'python3';
  const probe = spawnSync(
    python,
    ['-c', 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2])'],
    { encoding: 'utf8' },
  );
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${python} with the venv and ensurepip modules is needed to install Schemathesis ` +
        `(Debian: apt-get install python3-venv): ${probe.error?.message ?? probe.stderr.trim()}`,
    );
  }
  const [major, minor] = probe.stdout.trim().split('.').map(Number);
  if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    throw new Error(`Schemathesis ${SCHEMATHESIS_VERSION} needs Python >= ${MIN_PYTHON.join('.')}; ${python} is ${major}.${minor}`);
  }
  return python;
}

/**
 * The path of the pinned `schemathesis` command, installing it first when it is missing, of
 * another version or half-installed (the marker is written last).
 * @returns {string}
 */
export function ensureSchemathesis() {
  if (installed()) return SCHEMATHESIS_BIN;
  const python = findPython();
  console.error(`Installing Schemathesis ${SCHEMATHESIS_VERSION} into ${path.relative(projectRoot, SCHEMATHESIS_VENV)}`);
  rmSync(SCHEMATHESIS_VENV, { recursive: true, force: true });
  mkdirSync(path.dirname(SCHEMATHESIS_VENV), { recursive: true });
  const run = (command, args) => execFileSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  run(python, ['-m', 'venv', SCHEMATHESIS_VENV]);
  const pip = path.join(SCHEMATHESIS_VENV, 'bin', 'pip');
  // --no-deps: the requirements file is the complete, pinned set.
  run(pip, ['install', '--quiet', '--disable-pip-version-check', '--no-deps', '-r', SCHEMATHESIS_REQUIREMENTS]);
  run(pip, ['check', '--disable-pip-version-check']);
  const version = execFileSync(SCHEMATHESIS_BIN, ['--version'], { encoding: 'utf8' });
  if (!version.includes(SCHEMATHESIS_VERSION)) throw new Error(`installed Schemathesis reports ${version.trim()}`);
  writeFileSync(MARKER, `${requirementsDigest()}\n`);
  return SCHEMATHESIS_BIN;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.log(ensureSchemathesis());
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
