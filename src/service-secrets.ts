import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from './config.ts';
import { generateEncryptionKey, randomToken, SecretBox } from './secrets.ts';

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

const PRODUCER_TOKEN: SharedSecret = {
  variable: 'EVENT_PRODUCER_TOKEN',
  value: (config) => config.eventProducerToken,
  fileName: 'producer-token',
  make: () => `ptk_${randomToken(32)}`,
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

/** EVENT_PRODUCER_TOKEN, and the file it was read from in the embedded mode. */
export function loadProducerToken(config: Config): Promise<{ value: string; file?: string }> {
  return configuredOrGenerated(config, PRODUCER_TOKEN, embedded(config));
}

/**
 * SECRET_ENCRYPTION_KEY and EVENT_PRODUCER_TOKEN for a set of replicas started together
 * (`npm run cluster`): the configured values, or values generated once in DATA_DIR.
 */
export async function sharedReplicaSecrets(config: Config): Promise<Record<'SECRET_ENCRYPTION_KEY' | 'EVENT_PRODUCER_TOKEN', string>> {
  const [key, token] = await Promise.all([
    configuredOrGenerated(config, ENCRYPTION_KEY, true),
    configuredOrGenerated(config, PRODUCER_TOKEN, true),
  ]);
  return { SECRET_ENCRYPTION_KEY: key.value, EVENT_PRODUCER_TOKEN: token.value };
}
