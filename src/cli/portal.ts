import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { listApiKeys, WEBHOOKS_SERVICE } from '../db/queries/api-keys.ts';
import { mintPortalLink } from '../db/queries/portal-sessions.ts';
import { portalLinkUrl } from '../portal/link.ts';
import { connectDatabase } from './database.ts';
import { PROJECT_ID } from './keys.ts';
import { CliError, UsageError, type Command } from './output.ts';

const USAGE = `usage:
  portal link --project <id> [--key <api key id>] [--json]
      a one-time link to the customer portal of the project (opens once, within ten minutes);
      the session acts as --key, by default the project's newest active key with the webhooks service`;

/** `portal link`: mints a customer portal link directly in the database (admin). */
export const portalCommand: Command = { usage: USAGE, actions: ['link'], run: link };

async function link(config: Config, args: string[]): Promise<void> {
  const rest = args.slice(1);
  const { values } = parseArgs({
    args: rest,
    options: { project: { type: 'string' }, key: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const projectId = values.project;
  if (!projectId || !PROJECT_ID.test(projectId)) throw new UsageError('--project is required: 1-128 characters of A-Z a-z 0-9 . _ : @ -');

  const database = await connectDatabase(config);
  try {
    const usable = (await listApiKeys(database.db, projectId)).filter((key) => !key.revokedAt && key.services.includes(WEBHOOKS_SERVICE));
    const key = values.key ? usable.find((candidate) => candidate.id === values.key) : usable.at(-1);
    if (!key) {
      throw new CliError(
        values.key
          ? `${values.key} is not an active API key of project ${projectId} with the ${WEBHOOKS_SERVICE} service`
          : `project ${projectId} has no active API key with the ${WEBHOOKS_SERVICE} service; create one with: keys create --project ${projectId} --services ${WEBHOOKS_SERVICE}`,
      );
    }
    const { session, token } = await mintPortalLink(database.db, key);
    const url = portalLinkUrl(config.http.publicUrl ?? config.cli.apiUrl, token);
    const expiresAt = session.linkExpiresAt.toISOString();
    if (values.json) {
      console.log(JSON.stringify({ id: session.id, url, expires_at: expiresAt, api_key_id: key.id }));
    } else {
      console.log(`Portal link for project ${projectId}, acting as API key ${key.id} (opens once, until ${expiresAt}):\n  ${url}`);
    }
  } finally {
    await database.close();
  }
}
