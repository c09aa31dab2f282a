#!/usr/bin/env node
// Tags a release: checks that CHANGELOG.md has a section for package.json's version and that the
// working tree is clean, then makes the annotated tag v<version>, whose message is that section,
// and records the release in releases.json (version, commit, date) with a commit of its own, since
// a clone may not carry tags: tests that need an earlier release's code find its commit there.
// It pushes nothing: `git push origin HEAD v<version>` publishes both.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const git = (...args) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' }).trim();

/** Stops with one line on stderr and exit code 1. */
function fail(message) {
  console.error(`release: ${message}`);
  process.exit(1);
}

const { name, version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const changelog = readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8');
const escaped = version.replaceAll('.', '\\.');
const heading = new RegExp(`^## \\[${escaped}\\] - (\\d{4}-\\d{2}-\\d{2})$`, 'm').exec(changelog);
if (!heading) fail(`CHANGELOG.md has no "## [${version}] - YYYY-MM-DD" section for package.json's version`);
const rest = changelog.slice(heading.index + heading[0].length);
const notes = rest.slice(0, rest.search(/^## |(?![\s\S])/m)).trim();
if (!notes) fail(`the CHANGELOG.md section of ${version} is empty`);

if (git('status', '--porcelain') !== '') fail('the working tree has uncommitted changes: commit them first');
const tag = `v${version}`;
if (git('tag', '--list', tag) !== '') fail(`the tag ${tag} already exists`);
const recordFile = path.join(root, 'releases.json');
/** @type {{ version: string, commit: string, date: string }[]} */
const releases = existsSync(recordFile) ? JSON.parse(readFileSync(recordFile, 'utf8')) : [];
if (releases.some((release) => release.version === version)) fail(`releases.json already records ${version}`);

// --cleanup=whitespace keeps the section's `### ` headings, which git would strip as comments.
execFileSync('git', ['-C', root, 'tag', '--annotate', '--cleanup=whitespace', tag, '--file', '-'], { input: `${name} ${version}\n\n${notes}\n` });
const commit = git('rev-parse', 'HEAD');
releases.push({ version, commit, date: heading[1] });
writeFileSync(recordFile, `${JSON.stringify(releases, null, 2)}\n`);
git('add', 'releases.json');
git('commit', '--quiet', '--message', `Record release ${tag}: its commit in releases.json`);
console.log(`Tagged ${commit.slice(0, 7)} as ${tag} and recorded it in releases.json. Publish both with: git push origin HEAD ${tag}`);
