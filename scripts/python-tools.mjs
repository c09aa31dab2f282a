// Installs pinned Python command-line tools, each into a virtual environment of its own in
// .tools/<name>-<version>, once: later runs find the finished install (its marker names the
// pinned requirements) and return at once. The one place that knows how a project's Python tool
// is installed and cached (Schemathesis, kubernetes-validate).
//
// Needs `python3` (or the Python named by PYTHON) with the venv module (Debian: apt-get install
// python3-venv) and, on the first run only, the Python package index (pip's own settings).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * @typedef {object} PythonToolSpec A pinned Python tool.
 * @property {string} name the package's name, also the venv's (`.tools/<name>-<version>`)
 * @property {string} version the version `<command> --version` must print
 * @property {string} requirements a requirements file pinning the tool and every package it pulls in
 * @property {string} command the console script the tool installs
 * @property {[number, number]} minPython the oldest Python it runs on
 */

/** @param {PythonToolSpec} spec @returns {string} the tool's virtual environment */
export function pythonToolVenv(spec) {
  return path.join(projectRoot, '.tools', `${spec.name}-${spec.version}`);
}

/** @param {PythonToolSpec} spec @returns {string} the path of the tool's command in its venv */
export function pythonToolCommand(spec) {
  return path.join(pythonToolVenv(spec), 'bin', spec.command);
}

const markerOf = (spec) => path.join(pythonToolVenv(spec), '.installed');

function requirementsDigest(spec) {
  return createHash('sha256').update(readFileSync(spec.requirements)).digest('hex');
}

function installed(spec) {
  const marker = markerOf(spec);
  return (
    existsSync(pythonToolCommand(spec)) && existsSync(marker) && readFileSync(marker, 'utf8').trim() === requirementsDigest(spec)
  );
}

/** `python3` (or PYTHON), checked for the version the tool needs and for the venv module. */
function findPython(spec) {
  const python = process.env.PYTHON || 'python3';
  const probe = spawnSync(python, ['-c', 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2])'], {
    encoding: 'utf8',
  });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${python} with the venv and ensurepip modules is needed to install ${spec.name} ` +
        `(Debian: apt-get install python3-venv): ${probe.error?.message ?? probe.stderr.trim()}`,
    );
  }
  const [major, minor] = probe.stdout.trim().split('.').map(Number);
  const [minMajor, minMinor] = spec.minPython;
  if (major < minMajor || (major === minMajor && minor < minMinor)) {
    throw new Error(`${spec.name} ${spec.version} needs Python >= ${minMajor}.${minMinor}; ${python} is ${major}.${minor}`);
  }
  return python;
}

/**
 * The path of the tool's command, installing the pinned requirements first when the tool is
 * missing, of another version or half-installed (the marker is written last).
 * @param {PythonToolSpec} spec
 * @returns {string}
 */
export function ensurePythonTool(spec) {
  const command = pythonToolCommand(spec);
  if (installed(spec)) return command;
  const python = findPython(spec);
  const venv = pythonToolVenv(spec);
  console.error(`Installing ${spec.name} ${spec.version} into ${path.relative(projectRoot, venv)}`);
  rmSync(venv, { recursive: true, force: true });
  mkdirSync(path.dirname(venv), { recursive: true });
  const run = (file, args) => execFileSync(file, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  run(python, ['-m', 'venv', venv]);
  const pip = path.join(venv, 'bin', 'pip');
  // --no-deps: the requirements file is the complete, pinned set.
  run(pip, ['install', '--quiet', '--disable-pip-version-check', '--no-deps', '-r', spec.requirements]);
  run(pip, ['check', '--disable-pip-version-check']);
  const reported = execFileSync(command, ['--version'], { encoding: 'utf8' });
  if (!reported.includes(spec.version)) throw new Error(`installed ${spec.name} reports ${reported.trim()}`);
  writeFileSync(markerOf(spec), `${requirementsDigest(spec)}\n`);
  return command;
}
