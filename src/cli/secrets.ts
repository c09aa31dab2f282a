import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { resealEventPayloads } from '../db/queries/events.ts';
import { resealWebhookSecrets } from '../db/queries/webhooks.ts';
import { loadSecretBox } from '../secrets/installation.ts';
import { connectDatabase } from './database.ts';
import { CliError, type Command } from './output.ts';

const USAGE = `usage: secrets reseal [--json]
  After rotating SECRET_ENCRYPTION_KEY (the old key moved to SECRET_ENCRYPTION_PREVIOUS_KEYS),
  re-encrypts every webhook secret, every webhook's custom headers and every event payload under
  the new key. Also seals what an earlier release stored in clear (payloads, custom headers) and
  binds webhook secrets sealed before they were bound to their webhook.`;

/** `secrets reseal`: the last step of an encryption-key rotation, and of an upgrade. */
export const secretsCommand: Command = { usage: USAGE, actions: ['reseal'], run: reseal };

async function reseal(config: Config, args: string[]): Promise<void> {
  const rest = args.slice(1);
  const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } } });
  const box = await loadSecretBox(config);
  const database = await connectDatabase(config);
  try {
    const { resealed, unopenable } = await resealWebhookSecrets(database.db, box);
    const payloads = await resealEventPayloads(database.db, box);
    console.log(
      values.json
        ? JSON.stringify({ resealed, payloads_resealed: payloads.resealed, unopenable_webhooks: unopenable, unopenable_events: payloads.unopenable })
        : `Resealed the secret and headers of ${resealed} webhook${resealed === 1 ? '' : 's'} and ${payloads.resealed} event payload${payloads.resealed === 1 ? '' : 's'} under the current key.`,
    );
    const problems: string[] = [];
    if (unopenable.length > 0) {
      problems.push(
        `the secret or headers of ${unopenable.length} webhook${unopenable.length === 1 ? '' : 's'} do not open (sealed for another webhook or altered; left as they are): ${unopenable.join(', ')}. ` +
          'Rotate their secret and set their headers again (POST /webhooks/{id}/rotate-secret, PATCH /webhooks/{id}).',
      );
    }
    if (payloads.unopenable.length > 0) {
      problems.push(
        `the payload of ${payloads.unopenable.length} event${payloads.unopenable.length === 1 ? '' : 's'} does not open (altered, or under a key not configured; left as it is): ${payloads.unopenable.join(', ')}. ` +
          'Keep the key it was sealed with in SECRET_ENCRYPTION_PREVIOUS_KEYS until these are resealed or erased.',
      );
    }
    if (problems.length > 0) throw new CliError(problems.join('\n'));
  } finally {
    await database.close();
  }
}
