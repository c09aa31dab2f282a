import { execFile, execFileSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { startGroup, type GroupProcess } from './embedded-service.ts';
import { serviceNodeFlags } from './service-command.ts';

/*
 * Earlier releases of the service, run for real from their own code: the upgrade test starts one
 * on a data directory and the working tree after it. A release is found in releases.json (a
 * clone may not carry tags), its files taken from this repository's history with `git archive`,
 * and its dependencies installed with `npm ci` once, into .tools/releases/<version>. The Temporal
 * binaries this checkout built are hard-linked into the release's own .tools: a release that pins
 * the same versions uses them as they are, and one that pins others builds its own over the links.
 */

const projectRoot = path.resolve(import.meta.dirname, '../..');
const RELEASES_DIR = path.join(projectRoot, '.tools', 'releases');
const execFileAsync = promisify(execFile);

/** A release as releases.json records it. */
export interface Release {
  version: string;
  commit: string;
  date: string;
}

/** Every release releases.json records, oldest first. */
export function recordedReleases(): Release[] {
  return JSON.parse(readFileSync(path.join(projectRoot, 'releases.json'), 'utf8')) as Release[];
}

/** The newest release recorded before this checkout's own commit: what an upgrade starts from. */
export function previousRelease(): Release {
  const releases = recordedReleases();
  const head = execFileSync('git', ['-C', projectRoot, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  const earlier = releases.filter((release) => release.commit !== head);
  const release = earlier.at(-1);
  if (!release) throw new Error('releases.json records no release before this commit');
  return release;
}

/**
 * The directory of `release`'s code with its dependencies installed, made on first use and kept.
 * A directory left half-made by an interrupted run is made again. Its commands run as child
 * processes the test worker awaits: `npm ci` can take minutes on a new machine, and a worker whose
 * event loop is blocked that long fails the run ("Timeout calling onTaskUpdate").
 */
export async function prepareRelease(release: Release): Promise<string> {
  const dir = path.join(RELEASES_DIR, release.version);
  const done = path.join(dir, '.prepared');
  if (!existsSync(done) || readFileSync(done, 'utf8') !== release.commit) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const archive = `${dir}.tar`;
    await execFileAsync('git', ['-C', projectRoot, 'archive', '--format=tar', `--output=${archive}`, release.commit]);
    await execFileAsync('tar', ['-xf', archive, '-C', dir]);
    rmSync(archive);
    await execFileAsync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
    writeFileSync(done, release.commit);
  }
  linkTree(path.join(projectRoot, '.tools', 'bin'), path.join(dir, '.tools', 'bin'), (name) => name.startsWith('temporal'));
  linkTree(path.join(projectRoot, '.tools', 'share'), path.join(dir, '.tools', 'share'), (name) => name.startsWith('temporal'));
  return dir;
}

/**
 * The directory of `release` as {@link prepareRelease} made it, for a file of a suite whose
 * global set-up prepared it (the files, run at once, would otherwise make it over each other).
 */
export function preparedReleaseDir(release: Release): string {
  const dir = path.join(RELEASES_DIR, release.version);
  const done = path.join(dir, '.prepared');
  if (!existsSync(done) || readFileSync(done, 'utf8') !== release.commit) throw new Error(`release ${release.version} is not prepared in ${dir}: its suite's global set-up prepares it`);
  return dir;
}

/** Hard-links the files of `from` (the entries `take` accepts, folders whole) into `to`, replacing what is there. */
function linkTree(from: string, to: string, take: (name: string) => boolean = () => true): void {
  if (!existsSync(from)) return;
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (!take(entry.name)) continue;
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      linkTree(source, target);
    } else {
      rmSync(target, { force: true });
      linkSync(source, target);
    }
  }
}

/** `src/main.ts [role]` of the release in `dir`, with its own `npm start` flags, as its own process group. */
export function startRelease(dir: string, env: NodeJS.ProcessEnv, args: string[] = []): GroupProcess {
  return startGroup(process.execPath, [...serviceNodeFlags(dir), 'src/main.ts', ...args], env, dir);
}

/**
 * `npm run cli -- <args>` of the release in `dir`: its standard output, failing with its error
 * output. Run as a child process the test awaits: a test blocked for the seconds a CLI takes
 * misses the API closing its idle kept-alive connection, and its next request, sent on it, fails.
 */
export async function runReleaseCli(dir: string, env: NodeJS.ProcessEnv, args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(process.execPath, ['--import', './scripts/typescript.mjs', 'src/cli/index.ts', ...args], {
    cwd: dir,
    env: { ...env, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return stdout;
}
