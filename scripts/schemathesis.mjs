#!/usr/bin/env node
// Installs the pinned Schemathesis (the OpenAPI property-based tester of `npm run test:schemathesis`)
// into a Python virtual environment in .tools/schemathesis-<version>, once (scripts/python-tools.mjs).
//
//   node scripts/schemathesis.mjs   installs if needed, then prints the path of the `schemathesis` command
//
// Needs `python3` (or the Python named by PYTHON) >= 3.11 with the venv module (Debian: apt-get
// install python3-venv) and, on the first run only, the Python package index (pip's own settings).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensurePythonTool, pythonToolCommand, pythonToolVenv } from './python-tools.mjs';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const SCHEMATHESIS_VERSION = '4.32.5';
/** Schemathesis and its dependencies, every version pinned. */
export const SCHEMATHESIS_REQUIREMENTS = path.join(projectRoot, 'scripts', 'schemathesis-requirements.txt');

/** @type {import('./python-tools.mjs').PythonToolSpec} */
const SCHEMATHESIS = {
  name: 'schemathesis',
  version: SCHEMATHESIS_VERSION,
  requirements: SCHEMATHESIS_REQUIREMENTS,
  command: 'schemathesis',
  minPython: [3, 11],
};

export const SCHEMATHESIS_VENV = pythonToolVenv(SCHEMATHESIS);
export const SCHEMATHESIS_BIN = pythonToolCommand(SCHEMATHESIS);

/**
 * The path of the pinned `schemathesis` command, installing it first when it is missing, of
 * another version or half-installed.
 * @returns {string}
 */
export function ensureSchemathesis() {
  return ensurePythonTool(SCHEMATHESIS);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.log(ensureSchemathesis());
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
