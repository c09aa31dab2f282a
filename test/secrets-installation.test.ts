import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, type Config } from '../src/config.ts';
import { isEncryptionKey } from '../src/secrets/crypto.ts';
import { loadSecretBox, sharedReplicaSecrets } from '../src/secrets/installation.ts';
import { serviceNodeFlags } from './support/service-command.ts';

const projectRoot = path.resolve(import.meta.dirname, '..');
const KEY_FILE_NAME = 'secret-encryption.key';

let scratch: string;
let config: Config;
let keyFile: string;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'secrets-installation-test-'));
  config = parseConfig({ DATA_DIR: path.join(scratch, 'data') });
  keyFile = path.join(config.dataDir, KEY_FILE_NAME);
});

afterEach(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function rejection(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but the call succeeded');
}

/**
 * A first start in a process of its own whose writes to files all fail (a file size limit of 0,
 * set once the process has loaded, so only the key's write meets it), as when a start dies
 * after creating the key file and before its contents reach it. Resolves with its exit code and
 * what it printed on stderr.
 */
async function firstStartWhoseWriteFails(dataDir: string): Promise<{ code: number | null; stderr: string }> {
  const moduleUrl = (file: string) => JSON.stringify(pathToFileURL(path.join(projectRoot, file)).href);
  const script = `
    const { parseConfig } = await import(${moduleUrl('src/config.ts')});
    const { sharedReplicaSecrets } = await import(${moduleUrl('src/secrets/installation.ts')});
    const config = parseConfig({ DATA_DIR: ${JSON.stringify(dataDir)} });
    process.stdout.write('ready\\n');
    process.stdin.once('data', () => sharedReplicaSecrets(config).then(() => process.stdin.destroy()));
  `;
  const child = spawn(process.execPath, [...serviceNodeFlags(), '--input-type=module', '-e', script], {
    cwd: projectRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = once(child, 'exit');
  const ready = once(child.stdout, 'data').then(() => true);
  if (!(await Promise.race([ready, exited.then(() => false)]))) {
    throw new Error(`the first start exited before it was ready:\n${stderr}`);
  }
  execFileSync('prlimit', ['--pid', String(child.pid), '--fsize=0']);
  child.stdin.write('go\n');
  const [code] = (await exited) as [number | null];
  return { code, stderr };
}

describe('the generated SECRET_ENCRYPTION_KEY file', () => {
  it('gives every one of several concurrent first starts on a fresh DATA_DIR the same key, the one in the file', async () => {
    const keys = await Promise.all(
      Array.from({ length: 16 }, async () => (await sharedReplicaSecrets(config)).SECRET_ENCRYPTION_KEY),
    );

    const stored = (await readFile(keyFile, 'utf8')).trim();
    expect(isEncryptionKey(stored)).toBe(true);
    expect(new Set(keys)).toEqual(new Set([stored]));
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect(await readdir(config.dataDir)).toEqual([KEY_FILE_NAME]);
  });

  it.skipIf(process.platform !== 'linux')(
    'is never left empty by a first start that fails while writing it: the next start generates a good key',
    async () => {
      const failedStart = await firstStartWhoseWriteFails(config.dataDir);
      expect(failedStart.code).not.toBe(0);
      expect(failedStart.stderr).toContain('EFBIG');
      expect(await readdir(config.dataDir)).toEqual([]);

      const { SECRET_ENCRYPTION_KEY } = await sharedReplicaSecrets(config);
      expect(isEncryptionKey(SECRET_ENCRYPTION_KEY)).toBe(true);
      expect((await readFile(keyFile, 'utf8')).trim()).toBe(SECRET_ENCRYPTION_KEY);
    },
  );

  it('is read, not replaced, on a later start', async () => {
    const first = await sharedReplicaSecrets(config);
    expect(await sharedReplicaSecrets(config)).toEqual(first);
    await expect(loadSecretBox(config)).resolves.toBeDefined();
  });

  it.each([
    ['empty', '', /is empty/],
    ['only a newline', '\n', /is empty/],
    ['not a 32-byte key', 'not-a-key\n', /does not hold a SECRET_ENCRYPTION_KEY \(32 bytes in base64\)/],
  ])(
    'when %s, stops every start with an error naming the file and what to do, and is left as it was',
    async (_case, contents, problem) => {
      await mkdir(config.dataDir, { recursive: true });
      await writeFile(keyFile, contents, { mode: 0o600 });

      for (const start of [() => loadSecretBox(config), () => sharedReplicaSecrets(config)]) {
        const error = await rejection(start);
        expect(error).toBeInstanceOf(ConfigError);
        expect(error.message).toContain(keyFile);
        expect(error.message).toMatch(problem);
        expect(error.message).toMatch(/restore it from a backup, or set SECRET_ENCRYPTION_KEY to that key/);
        expect(error.message).toMatch(/\(a new DATA_DIR\), delete it and start again/);
      }
      expect(await readFile(keyFile, 'utf8')).toBe(contents);
    },
  );
});
