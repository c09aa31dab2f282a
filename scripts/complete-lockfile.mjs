#!/usr/bin/env node
// Completes package-lock.json with the other platforms' native packages of @swc/core and rollup.
//
// The npm registry mirror of our build machines answers 404 for native packages of platforms it
// does not host (darwin, win32, the rarer linux ones). `npm install` then leaves those optional
// packages out of the lock file, and `npm ci` refuses the lock as out of sync with package.json.
// This script adds the missing entries with their platform constraints (derived from the package
// name, exactly as the published manifests declare them), so `npm ci` skips them everywhere except
// on their own platform, where npm fetches them as usual. Run it after any `npm install` that
// changes the lock file.
import { readFileSync, writeFileSync } from 'node:fs';

const LOCK_PATH = new URL('../package-lock.json', import.meta.url);
const NATIVE_PARENTS = ['node_modules/@swc/core', 'node_modules/rollup'];

const lock = JSON.parse(readFileSync(LOCK_PATH, 'utf8'));
const added = [];

for (const parentPath of NATIVE_PARENTS) {
  const parent = lock.packages[parentPath];
  if (!parent) continue;
  const siblings = Object.entries(parent.optionalDependencies ?? {})
    .map(([name]) => lock.packages[`node_modules/${name}`])
    .filter(Boolean);
  const template = siblings[0];
  if (!template) throw new Error(`${parentPath}: no native package of this platform in the lock file to copy from`);

  for (const [name, version] of Object.entries(parent.optionalDependencies ?? {})) {
    const entryPath = `node_modules/${name}`;
    if (lock.packages[entryPath]) continue;
    const platform = platformOf(name);
    if (!platform) continue;
    // Keys in the order npm itself writes them, so a later `npm install` leaves the file alone.
    lock.packages[entryPath] = {
      version,
      cpu: platform.cpu,
      ...(template.dev ? { dev: true } : {}),
      ...(platform.libc ? { libc: platform.libc } : {}),
      license: template.license,
      optional: true,
      os: platform.os,
      ...(template.engines ? { engines: template.engines } : {}),
    };
    added.push(name);
  }
}

lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync(LOCK_PATH, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length ? `added ${added.length} platform entries: ${added.join(', ')}` : 'lock file already complete');

/** `@rollup/rollup-linux-arm64-musl` → `{ os: ['linux'], cpu: ['arm64'], libc: ['musl'] }`. */
function platformOf(name) {
  const match = /-(aix|android|darwin|freebsd|linux|netbsd|openbsd|openharmony|sunos|win32)-([a-z0-9]+)(?:-([a-z]+))?$/.exec(name);
  if (!match) return undefined;
  const [, os, cpu, abi] = match;
  const libc = os === 'linux' && abi ? (abi.startsWith('musl') ? 'musl' : abi.startsWith('gnu') ? 'glibc' : undefined) : undefined;
  return { os: [os], cpu: [cpu], libc: libc ? [libc] : undefined };
}
