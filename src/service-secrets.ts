import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from './config.ts';
import { generateEncryptionKey, randomToken, SecretBox } from './secrets.ts';

/**
 * A secret from configuration or, in the embedded mode only, from a file in DATA_DIR
 * made on first start. A service on a real database must be given it.
 */
async function configuredOrEmbedded(
  config: Config,
  variable: string,
  value: string | undefined,
  fileName: string,
  make: () => string,
): Promise<{ value: string; file?: string }> {
  if (value) return { value };
  if (config.database.kind !== 'pglite') {
    throw new ConfigError(`Invalid configuration:\n  ${variable}: is required when DATABASE_URL is set`);
  }
  const file = path.join(config.dataDir, fileName);
  const stored = await readFile(file, 'utf8').catch(() => undefined);
  if (stored?.trim()) return { value: stored.trim(), file };
  await mkdir(config.dataDir, { recursive: true });
  const made = make();
  try {
    // 'wx': when two processes start on a fresh DATA_DIR, the first file wins and both use it.
    await writeFile(file, `${made}\n`, { mode: 0o600, flag: 'wx' });
    return { value: made, file };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { value: (await readFile(file, 'utf8')).trim(), file };
  }
}

/** The box that seals webhook secrets: SECRET_ENCRYPTION_KEY, and the previous keys still accepted for opening. */
export async function loadSecretBox(config: Config): Promise<SecretBox> {
  const current = await configuredOrEmbedded(
    config,
    'SECRET_ENCRYPTION_KEY',
    config.secretEncryptionKey,
    'secret-encryption.key',
    generateEncryptionKey,
  );
  return new SecretBox(current.value, config.previousSecretEncryptionKeys);
}

/** EVENT_PRODUCER_TOKEN, and the file it was read from in the embedded mode. */
export function loadProducerToken(config: Config): Promise<{ value: string; file?: string }> {
  return configuredOrEmbedded(config, 'EVENT_PRODUCER_TOKEN', config.eventProducerToken, 'producer-token', () => `ptk_${randomToken(32)}`);
}
