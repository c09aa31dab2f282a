import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../config.ts';
import { CliError, UsageError, type Command } from './output.ts';

const USAGE = `webhooks CLI — usage: npm run cli -- <command> [options]

admin (direct database access; embedded mode needs \`npm start\` running, else DATABASE_URL):
  keys create --project <id> --services webhooks[,...] [--name <text>]   create an API key (token shown once)
  keys create --project <id> --services events                           create a producer key: publishes for this project only
  keys list [--project <id>]                                             list API keys
  keys revoke <key id>                                                   revoke an API key
  portal link --project <id> [--key <key id>]                            a one-time customer portal link (opens once, within 10 min)
  events publish --project <id> --data-file <file> [--id <key>]          publish a docauth.completed event
  events purge --project <id> (--id <key> | --request-id <id>)           erase events' data (data-subject request)
  retention run [--older-than <duration>]                                delete what is past the retention period now
  secrets reseal                                                         re-encrypt webhook secrets, headers and event payloads (key rotation, upgrades)
  limits show                                                            the configured limits and every override
  limits set --project <id> [--max-in-flight <n>] [--publish-rate <events/s>] [--publish-burst <n>] [--max-webhooks <n>]
                                                                         a project's send, publish and webhook limits
  limits set --destination <host[:port]> --max-in-flight <n>             the sends in flight to one destination
  limits reset (--project <id> | --destination <host[:port]>)            back to the configured limits

API (over HTTP; --token or WEBHOOKS_API_TOKEN, --api-url or WEBHOOKS_API_URL):
  webhooks list|create|get|update|delete|rotate-secret                    manage webhooks
  deliveries list|get|attempts|retry [--all]                              inspect and retry deliveries (--all: a bulk retry operation)
  operations get|cancel <webhook id> <operation id>                      follow or cancel a bulk retry operation
  listen [--create-webhook] [--secret <whsec_…>] [--port 4443]           local HTTPS receiver printing deliveries

every command takes --json for one JSON value on stdout, and --help (-h) for its usage.
exit codes: 0 done, 1 the command failed (error: … on stderr), 2 the command line is wrong.
--version prints the version.`;

/**
 * Every command of the CLI, by name, each loaded only when it runs: the database drivers and the
 * Temporal client take about 2 s to load, and the commands over HTTP need neither.
 */
export const commands: Record<string, () => Promise<Command>> = {
  keys: async () => (await import('./keys.ts')).keysCommand,
  events: async () => (await import('./events.ts')).eventsCommand,
  webhooks: async () => (await import('./resources.ts')).webhooksCommand,
  deliveries: async () => (await import('./resources.ts')).deliveriesCommand,
  operations: async () => (await import('./resources.ts')).operationsCommand,
  listen: async () => (await import('./listen.ts')).listenCommand,
  portal: async () => (await import('./portal.ts')).portalCommand,
  secrets: async () => (await import('./secrets.ts')).secretsCommand,
  retention: async () => (await import('./retention.ts')).retentionCommand,
  limits: async () => (await import('./limits.ts')).limitsCommand,
};

/** The package's version, from package.json. */
function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

/** Whether the arguments ask for help (options after `--` are operands, not options). */
function asksForHelp(args: string[]): boolean {
  const options = args.includes('--') ? args.slice(0, args.indexOf('--')) : args;
  return options.includes('--help') || options.includes('-h');
}

async function dispatch(argv: string[]): Promise<void> {
  const [name, ...args] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    console.log(USAGE);
    return;
  }
  if (name === '--version') {
    console.log(version());
    return;
  }
  const load = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!load) throw new UsageError(`unknown command "${name}"; run with --help for the list`);
  const command = await load();
  if (asksForHelp(args)) {
    console.log(command.usage);
    return;
  }
  if (command.actions.length > 0 && !command.actions.includes(args[0] ?? '')) {
    throw new UsageError(args[0] === undefined ? command.usage : `unknown ${name} command "${args[0]}"\n${command.usage}`);
  }
  await command.run(loadConfig(), args);
}

/**
 * Runs the CLI with `argv` (the arguments after the program's name): prints on stdout and
 * stderr and answers the exit code: 0 done, 1 the command failed, 2 a wrong command line.
 */
export async function runCli(argv: string[]): Promise<number> {
  try {
    await dispatch(argv);
    return 0;
  } catch (error) {
    const usage = error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true;
    const message =
      usage || error instanceof CliError || error instanceof ConfigError
        ? (error as Error).message
        : `unexpected error: ${(error as Error).message ?? String(error)}`;
    // A bare usage (a command run without its subcommand) is shown as it is.
    console.error(message.startsWith('usage:') ? message : `error: ${message}`);
    return usage ? 2 : 1;
  }
}
