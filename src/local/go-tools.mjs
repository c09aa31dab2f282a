// Builds pinned Go programs into .tools/bin with `go install` and finds them again: the one place
// that knows how a project tool is built and cached (the Temporal binaries, helm, promtool, the
// OpenTelemetry Collector builder).
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project's root directory. */
export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Where every built tool is cached. */
export const BIN_DIR = path.join(projectRoot, '.tools', 'bin');

/**
 * @typedef {{ module: string, version: string, binaries: Record<string, string>, tags?: string[], ldflags?: string, inScratchModule?: boolean }} GoModuleSpec
 * A Go module at a pinned version and the binaries built from it (name in .tools/bin -> package),
 * with the build tags and linker flags they are built with, if any. `inScratchModule`: built with
 * `go build` in a module of its own that requires it, for a module whose go.mod has directives
 * (`exclude`, `replace`) that make `go install pkg@version` refuse it.
 */

/** @param {string} file */
export function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** @param {string} command @returns {string | undefined} the command's path on PATH */
export function onPath(command) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, command))) return path.join(dir, command);
  }
  return undefined;
}

/** The module version `go version -m` reads from a Go binary, or undefined. */
function builtVersion(go, binary, module) {
  try {
    const info = execFileSync(go, ['version', '-m', binary], { encoding: 'utf8' });
    return new RegExp(`^\\s*mod\\s+${module.replaceAll('.', '\\.')}\\s+(\\S+)`, 'm').exec(info)?.[1];
  } catch {
    return undefined;
  }
}

/**
 * True when every binary of the module is in .tools/bin at the pinned version (any version when
 * Go is missing, so a machine without Go still uses what it has).
 * @param {string | undefined} go
 * @param {GoModuleSpec} spec
 */
export function isCurrent(go, spec) {
  return Object.keys(spec.binaries).every((name) => {
    const file = path.join(BIN_DIR, name);
    if (!isExecutable(file)) return false;
    return !go || builtVersion(go, file, spec.module) === spec.version;
  });
}

/**
 * `go install` of a module's binaries into a scratch GOBIN, then each renamed into .tools/bin.
 * @param {string} go
 * @param {string} key the start of the scratch directory's name
 * @param {GoModuleSpec} spec
 * @param {Record<string, string>} [env] extra environment for the build (CGO_ENABLED, GOFLAGS…)
 */
export function goInstall(go, key, spec, env = {}) {
  // A folder of this build's own: two builds from one module (promtool, prometheus) may run at once.
  mkdirSync(path.join(projectRoot, '.tools', 'build'), { recursive: true });
  const scratch = mkdtempSync(path.join(projectRoot, '.tools', 'build', `${key}-`));
  mkdirSync(BIN_DIR, { recursive: true });
  const packages = Object.values(spec.binaries).map((pkg) => `${pkg}@${spec.version}`);
  const flags = [...(spec.tags?.length ? [`-tags=${spec.tags.join(',')}`] : []), ...(spec.ldflags ? [`-ldflags=${spec.ldflags}`] : [])];
  console.error(`Building ${spec.module} ${spec.version} (${Object.keys(spec.binaries).join(', ')}) into .tools/bin; a few minutes the first time…`);
  /** @param {string[]} args */
  const run = (args) => {
    const result = spawnSync(go, args, { cwd: scratch, env: { ...process.env, GOBIN: scratch, GOFLAGS: '-mod=mod', ...env }, stdio: ['ignore', 'inherit', 'inherit'] });
    if (result.status !== 0) throw new Error(`go ${args.join(' ')} failed (exit ${result.status ?? result.signal})`);
  };
  try {
    if (spec.inScratchModule) {
      run(['mod', 'init', 'scratch']);
      run(['get', ...packages]);
      for (const pkg of Object.values(spec.binaries)) run(['build', ...flags, '-o', path.join(scratch, path.basename(pkg)), pkg]);
    } else {
      run(['install', ...flags, ...packages]);
    }
    for (const [name, pkg] of Object.entries(spec.binaries)) {
      renameSync(path.join(scratch, path.basename(pkg)), path.join(BIN_DIR, name));
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The error for a machine without Go that needs to build the given modules once. */
export function missingGoMessage(specs) {
  const modules = specs.map((spec) => `${spec.module}@${spec.version}`).join(', ');
  return (
    `Go is not installed, and it is needed once to build ${modules} into .tools/bin. ` +
    'Install Go >= 1.25 (https://go.dev/dl/ or your package manager) and run this again.'
  );
}

/**
 * Makes sure each module's binaries are in .tools/bin at their pinned versions, building what is
 * missing.
 * @param {GoModuleSpec[]} specs
 * @returns {Record<string, string>} binary name -> path
 */
export function ensureGoBinaries(specs) {
  const go = onPath('go');
  for (const spec of specs) {
    if (isCurrent(go, spec)) continue;
    if (!go) throw new Error(missingGoMessage(specs));
    goInstall(go, path.basename(spec.module), spec);
  }
  return Object.fromEntries(
    specs.flatMap((spec) => Object.keys(spec.binaries)).map((name) => [name, path.join(BIN_DIR, name)]),
  );
}
