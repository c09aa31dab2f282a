#!/usr/bin/env -S npx tsx
import { ConfigError, loadConfig } from '../config.ts';
import { eventsCommand } from './events.ts';
import { keysCommand } from './keys.ts';
import { listenCommand } from './listen.ts';
import { portalCommand } from './portal.ts';
import { deliveriesCommand, operationsCommand, webhooksCommand } from './resources.ts';
import { retentionCommand } from './retention.ts';
import { secretsCommand } from './secrets.ts';
import { CliError } from './output.ts';

const USAGE = `webhooks CLI — usage: npm run cli -- <command> [options]

admin (direct database access; embedded mode needs \`npm start\` running, else DATABASE_URL):
  keys create --project <id> --services webhooks[,...] [--name <text>]   create an API key (token shown once)
  keys list [--project <id>]                                             list API keys
  keys revoke <key id>                                                   revoke an API key
  portal link --project <id> [--key <key id>]                            a one-time customer portal link (opens once, within 10 min)
  events publish --project <id> --data-file <file> [--id <key>]          publish a docauth.completed event
  events purge --project <id> (--id <key> | --request-id <id>)           erase events' data (data-subject request)
  retention run [--older-than <duration>]                                delete what is past the retention period now
  secrets reseal                                                         re-encrypt webhook secrets and event payloads after a key rotation

API (over HTTP; --token or WEBHOOKS_API_TOKEN, --api-url or WEBHOOKS_API_URL):
  webhooks list|create|get|update|delete|rotate-secret                    manage webhooks
  deliveries list|get|attempts|retry [--all]                              inspect and retry deliveries (--all: a bulk retry operation)
  operations get|cancel <webhook id> <operation id>                      follow or cancel a bulk retry operation
  listen [--create-webhook] [--secret <whsec_…>] [--port 4443]           local HTTPS receiver printing deliveries

every command takes --json for one JSON value on stdout; errors are one line on stderr, exit 1.
run a command without arguments for its own usage.`;

const commands: Record<string, (config: ReturnType<typeof loadConfig>, args: string[]) => Promise<void>> = {
  keys: keysCommand,
  events: eventsCommand,
  webhooks: webhooksCommand,
  deliveries: deliveriesCommand,
  operations: operationsCommand,
  listen: listenCommand,
  portal: portalCommand,
  secrets: secretsCommand,
  retention: retentionCommand,
};

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return;
  }
  const run = commands[command];
  if (!run) throw new CliError(`unknown command "${command}"; run with --help for the list`);
  await run(loadConfig(), args);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message =
    error instanceof CliError || error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
      ? (error as Error).message
      : `unexpected error: ${(error as Error).message ?? String(error)}`;
  console.error(`error: ${message}`);
  process.exitCode = 1;
});
