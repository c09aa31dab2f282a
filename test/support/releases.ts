import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startGroup, type GroupProcess } from './embedded-service.ts';
import { serviceNodeFlags } from './service-command.ts';

/*
 * Earlier releases of the service, run for real from their own code: the upgrade test starts one
 * on a data directory and the working tree after it. A release is found in releases.json (a
 * clone may not carry tags), its files taken from this repository's history with `git archive`,
 * and its dependencies installed with `npm ci` once, into .tools/releases/<version>.
 */

const projectRoot = path.resolve(import.meta.dirname, '../..');
const RELEASES_DIR = path.join(projectRoot, '.tools', 'releases');

/** A release as releases.json records it. */
export interface Release {
  version: string;
  commit: string;
  date: string;
}

/** The newest release recorded before this checkout's own commit: what an upgrade starts from. */
export function previousRelease(): Release {
  const releases = JSON.parse(readFileSync(path.join(projectRoot, 'releases.json'), 'utf8')) as Release[];
  const head = execFileSync('git', ['-C', projectRoot, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  const earlier = releases.filter((release) => release.commit !== head);
  const release = earlier.at(-1);
  if (!release) throw new Error('releases.json records no release before this commit');
  return release;
}

/**
 * The directory of `release`'s code with its dependencies installed, made on first use and kept.
 * A directory left half-made by an interrupted run is made again.
 */
export function prepareRelease(release: Release): string {
  const dir = path.join(RELEASES_DIR, release.version);
  const done = path.join(dir, '.prepared');
  if (existsSync(done) && readFileSync(done, 'utf8') === release.commit) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = execFileSync('git', ['-C', projectRoot, 'archive', '--format=tar', release.commit], { maxBuffer: 512 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  writeFileSync(done, release.commit);
  return dir;
}

/** `src/main.ts [role]` of the release in `dir`, with its own `npm start` flags, as its own process group. */
export function startRelease(dir: string, env: NodeJS.ProcessEnv, args: string[] = []): GroupProcess {
  return startGroup(process.execPath, [...serviceNodeFlags(dir), 'src/main.ts', ...args], env, dir);
}

/** `npm run cli -- <args>` of the release in `dir`: its standard output, failing with its error output. */
export function runReleaseCli(dir: string, env: NodeJS.ProcessEnv, args: string[]): string {
  return execFileSync(process.execPath, ['--import', './scripts/typescript.mjs', 'src/cli/index.ts', ...args], {
    cwd: dir,
    env: { ...env, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 60_000,
  });
}
