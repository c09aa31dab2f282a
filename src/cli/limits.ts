import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { destinationOf, listLimits, resetLimits, setDestinationLimits, setProjectLimits, type StoredLimits } from '../db/queries/limits.ts';
import { connectDatabase } from './database.ts';
import { PROJECT_ID } from './keys.ts';
import { CliError, printTable, UsageError, type Command } from './output.ts';

const USAGE = `usage:
  limits show [--json]
    the configured limits, and every project's and destination's own that the operator set
  limits set (--project <id> | --destination <host[:port]>) --max-in-flight <n> [--json]
    sends in flight at most for that project's webhooks, or to that destination (host and port
    as webhook URLs name them; 443 when no port is given), instead of PROJECT_MAX_IN_FLIGHT or
    DESTINATION_MAX_IN_FLIGHT; 1-100000. Replicas apply it from their next request for a place.
  limits reset (--project <id> | --destination <host[:port]>) [--json]
    back to the configured limits`;

/** `limits show|set|reset`: the operator's per-project and per-destination limits, in the database (a project cannot change its own). */
export const limitsCommand: Command = { usage: USAGE, actions: ['show', 'set', 'reset'], run: limits };

/** A whole number from 1 to 100000, or a usage error naming `option`. */
function limitValue(option: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const number = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(number >= 1 && number <= 100_000)) throw new UsageError(`--${option} must be a whole number from 1 to 100000\n${USAGE}`);
  return number;
}

const asJson = (row: StoredLimits) => ({ scope: row.scope, name: row.name, max_in_flight: row.maxInFlight, updated_at: row.updatedAt.toISOString() });

async function limits(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      project: { type: 'string' },
      destination: { type: 'string' },
      'max-in-flight': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const maxInFlight = limitValue('max-in-flight', values['max-in-flight']);
  if (action !== 'show') {
    if ((values.project === undefined) === (values.destination === undefined)) throw new UsageError(`give one of --project and --destination\n${USAGE}`);
    if (values.project !== undefined && !PROJECT_ID.test(values.project)) throw new UsageError('--project must be 1-128 characters of A-Z a-z 0-9 . _ : @ -');
    if (action === 'set' && maxInFlight === undefined) throw new UsageError(`limits set needs a limit to set, such as --max-in-flight 50\n${USAGE}`);
  }

  const database = await connectDatabase(config);
  try {
    if (action === 'show') {
      const stored = await listLimits(database.db);
      const defaults = {
        endpoint_max_in_flight: config.flow.webhookMaxInFlight,
        project_max_in_flight: config.flow.projectMaxInFlight,
        destination_max_in_flight: config.flow.destinationMaxInFlight,
        worker_max_sends_in_flight: config.flow.workerMaxInFlight,
      };
      if (values.json) {
        console.log(JSON.stringify({ defaults, overrides: stored.map(asJson) }));
        return;
      }
      console.log(Object.entries(defaults).map(([name, value]) => `${name.toUpperCase()}=${value}`).join('  '));
      printTable(stored.map(asJson), ['scope', 'name', 'max_in_flight', 'updated_at']);
      return;
    }
    const destination = values.destination === undefined ? undefined : await destinationOf(database.db, values.destination);
    if (values.destination !== undefined && destination === undefined) throw new UsageError(`--destination must be a host, host:port or URL, not "${values.destination}"`);
    const [scope, name] = destination ? (['destination', destination] as const) : (['project', values.project!] as const);
    if (action === 'set') {
      const stored = scope === 'project' ? await setProjectLimits(database.db, name, { maxInFlight }) : await setDestinationLimits(database.db, name, { maxInFlight });
      if (values.json) console.log(JSON.stringify(asJson(stored)));
      else console.log(`${scope} ${name}: at most ${stored.maxInFlight} sends in flight.`);
      return;
    }
    const removed = await resetLimits(database.db, scope, name);
    if (!removed) throw new CliError(`${scope} ${name} has no limits of its own`);
    if (values.json) console.log(JSON.stringify({ scope, name, reset: true }));
    else console.log(`${scope} ${name}: back to the configured limits.`);
  } finally {
    await database.close();
  }
}
