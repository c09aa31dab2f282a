import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from '../config.ts';
import { generateEncryptionKey, isEncryptionKey, SecretBox } from './crypto.ts';

/** A secret every process of one installation must share. */
interface SharedSecret {
  variable: string;
  value: (config: Config) => string | undefined;
  fileName: string;
  make: () => string;
  isWellFormed: (value: string) => boolean;
  /** What a well-formed value is, for the error about a file that does not hold one. */
  form: string;
}

const ENCRYPTION_KEY: SharedSecret = {
  variable: 'SECRET_ENCRYPTION_KEY',
  value: (config) => config.secretEncryptionKey,
  fileName: 'secret-encryption.key',
  make: generateEncryptionKey,
  isWellFormed: isEncryptionKey,
  form: '32 bytes in base64',
};

/**
 * The secret from configuration or, where `generate` allows it (the embedded mode, and
 * `npm run cluster` for its replicas), from a file in DATA_DIR made on first use. A service
 * on a real database must be given it: its replicas could not agree on a generated one.
 */
async function configuredOrGenerated(
  config: Config,
  secret: SharedSecret,
  generate: boolean,
): Promise<{ value: string; file?: string }> {
  const configured = secret.value(config);
  if (configured) return { value: configured };
  if (!generate) {
    throw new ConfigError(`Invalid configuration:\n  ${secret.variable}: is required when DATABASE_URL is set`);
  }
  const file = path.join(config.dataDir, secret.fileName);
  const stored = await readSecretFile(file, secret);
  if (stored !== undefined) return { value: stored, file };
  await mkdir(config.dataDir, { recursive: true });
  await createFileOnce(file, `${secret.make()}\n`);
  // Ours or a concurrent start's, whichever was linked first: every process uses that one.
  const created = await readSecretFile(file, secret);
  if (created === undefined) throw new Error(`${file} disappeared right after it was created`);
  return { value: created, file };
}

/**
 * The secret a generated file holds, or undefined when there is no file. A file that exists
 * but holds no well-formed value is an error, never replaced: data sealed under the key it once
 * held would no longer open.
 */
async function readSecretFile(file: string, secret: SharedSecret): Promise<string | undefined> {
  let contents: string;
  try {
    contents = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const value = contents.trim();
  if (secret.isWellFormed(value)) return value;
  const problem = value
    ? `${file} does not hold a ${secret.variable} (${secret.form})`
    : `${file} is empty`;
  throw new ConfigError(
    `${problem}. If data was sealed under the key it held, do not delete it: restore it from a backup, ` +
      `or set ${secret.variable} to that key. If nothing was stored yet (a new DATA_DIR), delete it and ` +
      'start again to generate a new one.',
  );
}

/** What `link` fails with on a file system without hard links. */
const LINKS_UNSUPPORTED = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/** Writes a new file (mode 0600) and syncs it; false when it exists already. */
async function writeNewFile(file: string, contents: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    await handle.writeFile(contents);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/**
 * Creates `file` with `contents` unless it exists, without anyone ever seeing it partly written:
 * the contents go to a temporary file in the same folder (mode 0600), reach the disk, and only
 * then get the final name with `link`, which fails when the name exists, so the first one wins.
 */
async function createFileOnce(file: string, contents: string): Promise<void> {
  const folder = path.dirname(file);
  const temporaryFile = `${file}.${process.pid}.${randomBytes(8).toString('hex')}.tmp`;
  try {
    await writeNewFile(temporaryFile, contents);
    try {
      await link(temporaryFile, file);
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      if (code === 'EEXIST') return;
      if (!LINKS_UNSUPPORTED.has(code ?? '')) throw error;
      // A file system without hard links (SMB, some FUSE mounts): created in place, first one wins;
      // a crash in between leaves a file the next start refuses, naming it.
      if (!(await writeNewFile(file, contents))) return;
    }
    // The new name must outlive a crash too, or a restart would generate a different key.
    const folderHandle = await open(folder, 'r');
    try {
      await folderHandle.sync();
    } finally {
      await folderHandle.close();
    }
  } finally {
    await rm(temporaryFile, { force: true });
  }
}

const embedded = (config: Config) => config.database.kind === 'pglite';

/** The box that seals webhook secrets: SECRET_ENCRYPTION_KEY, and the previous keys still accepted for opening. */
export async function loadSecretBox(config: Config): Promise<SecretBox> {
  const current = await configuredOrGenerated(config, ENCRYPTION_KEY, embedded(config));
  return new SecretBox(current.value, config.previousSecretEncryptionKeys);
}

/**
 * SECRET_ENCRYPTION_KEY for a set of replicas started together (`npm run cluster`): the
 * configured value, or a value generated once in DATA_DIR.
 */
export async function sharedReplicaSecrets(config: Config): Promise<Record<'SECRET_ENCRYPTION_KEY', string>> {
  const key = await configuredOrGenerated(config, ENCRYPTION_KEY, true);
  return { SECRET_ENCRYPTION_KEY: key.value };
}
