#!/usr/bin/env -S npx tsx
import { ConfigError, loadConfig } from '../config.ts';
import { eventsCommand } from './events.ts';
import { keysCommand } from './keys.ts';
import { CliError } from './output.ts';

const USAGE = `webhooks CLI

usage: npm run cli -- <command> [options]

commands:
  keys create --project <id> --services webhooks[,...] [--json]   create an API key (token shown once)
  keys list [--project <id>] [--json]                              list API keys
  keys revoke <key id>                                             revoke an API key
  events publish --project <id> --data-file <file> [--id <key>] [--json]
                                                                   publish a docauth.completed event`;

const commands: Record<string, (config: ReturnType<typeof loadConfig>, args: string[]) => Promise<void>> = {
  keys: keysCommand,
  events: eventsCommand,
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
