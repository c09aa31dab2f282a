import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { recordedReleases } from './support/releases.ts';

/*
 * scripts/release.mjs in a scratch repository holding this checkout's package.json, CHANGELOG.md
 * and the script itself: it tags and records there, never here, and has no remote to push to.
 * And releases.json of this checkout: each release it records is a commit of this history.
 */

const projectRoot = path.resolve(import.meta.dirname, '..');
const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Release Test',
  GIT_AUTHOR_EMAIL: 'release@example.com',
  GIT_COMMITTER_NAME: 'Release Test',
  GIT_COMMITTER_EMAIL: 'release@example.com',
};
const version = (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
const scratch: string[] = [];

afterEach(() => {
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function git(repo: string, ...args: string[]): string {
  return execFileSync('git', ['-C', repo, ...args], { env: gitEnv, encoding: 'utf8' }).trim();
}

/** A repository with one commit of the release's files; `changelog` replaces CHANGELOG.md. */
function scratchRepository(changelog?: string): string {
  const repo = mkdtempSync(path.join(os.tmpdir(), 'release-'));
  scratch.push(repo);
  mkdirSync(path.join(repo, 'scripts'));
  for (const file of ['package.json', 'CHANGELOG.md', 'scripts/release.mjs']) copyFileSync(path.join(projectRoot, file), path.join(repo, file));
  if (changelog !== undefined) writeFileSync(path.join(repo, 'CHANGELOG.md'), changelog);
  git(repo, 'init', '--quiet');
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '--message', 'release candidate');
  return repo;
}

function release(repo: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(repo, 'scripts/release.mjs')], { env: gitEnv }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

describe('scripts/release.mjs', () => {
  it("makes the annotated tag of package.json's version, with its CHANGELOG.md section as the message", async () => {
    const repo = scratchRepository();
    const result = await release(repo);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain(`git push origin HEAD v${version}`);
    expect(git(repo, 'cat-file', '-t', `v${version}`)).toBe('tag');
    const released = git(repo, 'rev-parse', 'HEAD~1');
    expect(git(repo, 'rev-parse', `v${version}^{commit}`)).toBe(released);
    // The record is a commit of its own on top of the tagged one, and the tree is clean again.
    expect(git(repo, 'log', '-1', '--format=%s')).toBe(`Record release v${version}: its commit in releases.json`);
    expect(git(repo, 'status', '--porcelain')).toBe('');
    const changelogDate = /^## \[[^\]]+\] - (\S+)$/m.exec(readFileSync(path.join(repo, 'CHANGELOG.md'), 'utf8'))?.[1];
    expect(JSON.parse(readFileSync(path.join(repo, 'releases.json'), 'utf8'))).toEqual([{ version, commit: released, date: changelogDate }]);
    const message = git(repo, 'tag', '--list', '--format=%(contents)', `v${version}`);
    expect(message.split('\n')[0]).toBe(`webhook-delivery-service ${version}`);
    expect(message).toContain('### Added');
    expect(message).not.toContain('## [');

    const again = await release(repo);
    expect(again).toMatchObject({ code: 1, stderr: `release: the tag v${version} already exists\n` });

    // A clone without the tag still has the record, and the script will not record the version twice.
    git(repo, 'tag', '--delete', `v${version}`);
    expect(await release(repo)).toMatchObject({ code: 1, stderr: `release: releases.json already records ${version}\n` });
    expect(git(repo, 'tag', '--list')).toBe('');
  });

  it('refuses a changelog without the version, and uncommitted changes, tagging nothing', async () => {
    const withoutVersion = scratchRepository('# Changelog\n\n## [Unreleased]\n\n## [0.0.1] - 2020-01-01\n\n- Old.\n');
    const refused = await release(withoutVersion);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`no "## [${version}] - YYYY-MM-DD" section`);

    const dirty = scratchRepository();
    writeFileSync(path.join(dirty, 'package.json'), `${readFileSync(path.join(dirty, 'package.json'), 'utf8')}\n`);
    expect(await release(dirty)).toMatchObject({ code: 1, stderr: 'release: the working tree has uncommitted changes: commit them first\n' });
    for (const repo of [withoutVersion, dirty]) expect(git(repo, 'tag', '--list')).toBe('');
  });

  it("records in releases.json commits of this repository's history that carry each release's version and changelog section", () => {
    const releases = recordedReleases();
    expect(releases.length).toBeGreaterThanOrEqual(1);
    for (const { version: recorded, commit, date } of releases) {
      expect(git(projectRoot, 'cat-file', '-t', commit), `${recorded} at ${commit}`).toBe('commit');
      expect(git(projectRoot, 'merge-base', '--is-ancestor', commit, 'HEAD') === '', `${recorded}: ${commit} is an ancestor of HEAD`).toBe(true);
      expect((JSON.parse(git(projectRoot, 'show', `${commit}:package.json`)) as { version: string }).version).toBe(recorded);
      expect(git(projectRoot, 'show', `${commit}:CHANGELOG.md`)).toContain(`## [${recorded}] - ${date}`);
    }
  });
});
