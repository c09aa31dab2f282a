import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { createApiKey, listApiKeys, revokeApiKey, SERVICES } from '../db/queries/api-keys.ts';
import { connectDatabase } from './database.ts';
import { CliError, printTable, UsageError, type Command } from './output.ts';

const USAGE = `usage:
  keys create --project <id> --services webhooks|events[,...] [--name <text>] [--json]
    webhooks: the management API and portal links of the project;
    events: a producer key, which publishes events for this project only (POST /internal/v1/events)
  keys list [--project <id>] [--json]
  keys revoke <key id> [--json]`;

/** What a project id may be (as the producers' door says). */
export const PROJECT_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/** `keys create|list|revoke`: manage API keys and producer keys directly in the database. */
export const keysCommand: Command = { usage: USAGE, actions: ['create', 'list', 'revoke'], run: keys };

async function keys(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      project: { type: 'string' },
      services: { type: 'string' },
      name: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  // Every argument is checked before connecting, so a mistake is reported as such.
  const projectId = values.project;
  const services = (values.services ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const revokeId = positionals[0];
  if (action === 'create') {
    if (!projectId || !PROJECT_ID.test(projectId)) {
      throw new UsageError('--project is required: 1-128 characters of A-Z a-z 0-9 . _ : @ -');
    }
    if (services.length === 0) throw new UsageError('--services is required, for example --services webhooks');
    const unknown = services.filter((service) => !SERVICES.includes(service));
    if (unknown.length > 0) throw new UsageError(`unknown service ${unknown.join(', ')} in --services: ${SERVICES.join(' or ')}`);
  }
  if (action === 'revoke' && !revokeId) throw new UsageError('usage: keys revoke <key id>');

  const database = await connectDatabase(config);
  try {
    if (action === 'create') {
      const { key, token } = await createApiKey(database.db, { projectId: projectId!, services, name: values.name });
      if (values.json) {
        console.log(JSON.stringify({ id: key.id, project_id: key.projectId, services: key.services, token }));
      } else {
        console.log(`Created API key ${key.id} for project ${key.projectId} (services: ${key.services.join(', ')}).`);
        console.log(`Token (shown only once, store it now):\n  ${token}`);
      }
    } else if (action === 'list') {
      const keys = await listApiKeys(database.db, projectId);
      const rows = keys.map((key) => ({
        id: key.id,
        project_id: key.projectId,
        name: key.name ?? undefined,
        services: key.services,
        created_at: key.createdAt.toISOString(),
        revoked_at: key.revokedAt?.toISOString(),
      }));
      if (values.json) console.log(JSON.stringify(rows));
      else printTable(rows, ['id', 'project_id', 'services', 'name', 'created_at', 'revoked_at']);
    } else {
      const key = await revokeApiKey(database.db, revokeId!);
      if (!key) throw new CliError(`no active API key ${revokeId}`);
      if (values.json) console.log(JSON.stringify({ id: key.id, revoked_at: key.revokedAt?.toISOString() }));
      else console.log(`Revoked API key ${key.id}.`);
    }
  } finally {
    await database.close();
  }
}
