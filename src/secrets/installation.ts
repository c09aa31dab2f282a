import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from '../config.ts';
import { generateEncryptionKey, SecretBox } from './crypto.ts';

/** A secret every process of one installation must share. */
interface SharedSecret {
  variable: string;
  value: (config: Config) => string | undefined;
  fileName: string;
  make: () => string;
}

const ENCRYPTION_KEY: SharedSecret = {
  variable: 'SECRET_ENCRYPTION_KEY',
  value: (config) => config.secretEncryptionKey,
  fileName: 'secret-encryption.key',
  make: generateEncryptionKey,
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
  const stored = await readFile(file, 'utf8').catch(() => undefined);
  if (stored?.trim()) return { value: stored.trim(), file };
  await mkdir(config.dataDir, { recursive: true });
  const made = secret.make();
  try {
    // 'wx': when two processes start on a fresh DATA_DIR, the first file wins and both use it.
    await writeFile(file, `${made}\n`, { mode: 0o600, flag: 'wx' });
    return { value: made, file };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { value: (await readFile(file, 'utf8')).trim(), file };
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
