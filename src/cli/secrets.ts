import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { resealEventPayloads } from '../db/queries/events.ts';
import { resealWebhookSecrets } from '../db/queries/webhooks.ts';
import { loadSecretBox } from '../service-secrets.ts';
import { connectDatabase } from './database.ts';
import type { Command } from './output.ts';

const USAGE = `usage: secrets reseal [--json]
  After rotating SECRET_ENCRYPTION_KEY (the old key moved to SECRET_ENCRYPTION_PREVIOUS_KEYS),
  re-encrypts every webhook secret and every event payload under the new key; also seals the
  payloads an earlier release stored in clear.`;

/** `secrets reseal`: the last step of an encryption-key rotation. */
export const secretsCommand: Command = { usage: USAGE, actions: ['reseal'], run: reseal };

async function reseal(config: Config, args: string[]): Promise<void> {
  const rest = args.slice(1);
  const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } } });
  const box = await loadSecretBox(config);
  const database = await connectDatabase(config);
  try {
    const secrets = await resealWebhookSecrets(database.db, box);
    const payloads = await resealEventPayloads(database.db, box);
    console.log(
      values.json
        ? JSON.stringify({ resealed: secrets, payloads_resealed: payloads })
        : `Resealed ${secrets} webhook secret${secrets === 1 ? '' : 's'} and ${payloads} event payload${payloads === 1 ? '' : 's'} under the current key.`,
    );
  } finally {
    await database.close();
  }
}
