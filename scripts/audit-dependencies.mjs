#!/usr/bin/env node
// Dependency audit of what the service runs in production (package-lock.json without dev-only
// packages), in two steps:
//
// 1. `npm audit --omit=dev --audit-level=high`, where the registry answers audit requests: a
//    high or critical advisory fails.
// 2. Always, a pinned lockfile check that needs no registry: every production package, at its
//    version and integrity hash, must be in scripts/audited-dependencies.txt. A package added,
//    upgraded or repackaged fails until someone reviews it and runs `--record`. The registry
//    mirror of our build machines answers 405 to audit requests, so there this is the check
//    that runs: it does not find new advisories, but nothing enters production unreviewed.
//
// usage: node scripts/audit-dependencies.mjs [--record]
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const LOCK = new URL('../package-lock.json', import.meta.url);
const PIN = new URL('./audited-dependencies.txt', import.meta.url);
const PIN_HEADER = `# Production dependencies (package-lock.json without dev-only packages), reviewed:
# name@version integrity. scripts/audit-dependencies.mjs fails on any line not here;
# after reviewing a change, run: node scripts/audit-dependencies.mjs --record
`;

/** `name@version integrity` of every package production installs, sorted. */
function productionPackages() {
  const lock = JSON.parse(readFileSync(LOCK, 'utf8'));
  return Object.entries(lock.packages)
    .filter(([path, entry]) => path !== '' && !entry.dev && !entry.devOptional)
    .map(([path, entry]) => `${path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)}@${entry.version} ${entry.integrity ?? '(optional, other platform)'}`)
    .sort();
}

/** The registry's verdict: 'clean', 'vulnerable' (printed), or 'unavailable' when it does not answer audits. */
function registryAudit() {
  try {
    execFileSync('npm', ['audit', '--omit=dev', '--audit-level=high'], { stdio: ['ignore', 'inherit', 'pipe'], timeout: 120_000 });
    return 'clean';
  } catch (error) {
    const stderr = String(error.stderr ?? '');
    if (/audit endpoint returned an error|ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|\b40[45]\b|\b50[0-9]\b/.test(stderr) || error.code === 'ETIMEDOUT') {
      const reason = stderr.split('\n').find((line) => /audit|ENOTFOUND|ECONN|ETIMEDOUT|EAI_AGAIN/.test(line)) ?? error.message;
      console.log(`npm audit: the registry does not answer audit requests (${reason.trim()}); the pinned check decides`);
      return 'unavailable';
    }
    process.stderr.write(stderr);
    return 'vulnerable';
  }
}

const current = productionPackages();
if (process.argv.includes('--record')) {
  writeFileSync(PIN, `${PIN_HEADER}${current.join('\n')}\n`);
  console.log(`recorded ${current.length} production packages in scripts/audited-dependencies.txt`);
  process.exit(0);
}

let failed = false;
const verdict = registryAudit();
if (verdict === 'vulnerable') {
  console.error('npm audit: a high or critical advisory affects a production dependency (above)');
  failed = true;
} else if (verdict === 'clean') {
  console.log('npm audit: no high or critical advisory in the production dependencies');
}

const pinned = new Set(readFileSync(PIN, 'utf8').split('\n').filter((line) => line && !line.startsWith('#')));
const unreviewed = current.filter((line) => !pinned.has(line));
if (unreviewed.length > 0) {
  console.error(`pinned lockfile check: ${unreviewed.length} production package(s) not reviewed:\n  ${unreviewed.join('\n  ')}`);
  console.error('review them (and run npm audit where the registry answers), then: node scripts/audit-dependencies.mjs --record');
  failed = true;
} else {
  console.log(`pinned lockfile check: all ${current.length} production packages are the reviewed ones`);
}
process.exit(failed ? 1 : 0);
