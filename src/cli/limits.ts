import { parseArgs } from 'node:util';
import { WebhookUrlSchema } from '../api/schemas.ts';
import type { Config } from '../config.ts';
import { destinationOf, listLimits, resetLimits, setDestinationLimits, setProjectLimits, type StoredLimits } from '../db/queries/limits.ts';
import { connectDatabase } from './database.ts';
import { PROJECT_ID } from './keys.ts';
import { CliError, printTable, UsageError, type Command } from './output.ts';

const USAGE = `usage:
  limits show [--json]
    the configured limits, and every project's and destination's own that the operator set
  limits set --project <id> [--max-in-flight <n>] [--publish-rate <events/s>] [--publish-burst <n>]
             [--max-webhooks <n>] [--recovery-rate <sends/s>] [--json]
    that project's own limits instead of PROJECT_MAX_IN_FLIGHT (sends in flight of its webhooks,
    1-100000), PROJECT_PUBLISH_RATE and PROJECT_PUBLISH_BURST (its publish quota: 0.01-100000
    events per second, bursts of 1-1000000), PROJECT_MAX_WEBHOOKS (1-1000000) and
    PROJECT_RECOVERY_RATE (the pace of its endpoints' backlogs once their breakers close:
    0.1-1000 sends per second, 0 for none); the others it had are kept. Every replica applies
    them from its next request. A project whose quota is raised recovers at its own recovery rate
    only if it is set too.
  limits set --destination <host[:port]> --max-in-flight <n> [--json]
    sends in flight at most to that destination (host and port 1-65535 as webhook URLs name them,
    or such a URL; 443 when no port is given), instead of DESTINATION_MAX_IN_FLIGHT; 1-100000
  limits reset (--project <id> | --destination <host[:port]>) [--json]
    back to the configured limits, all of them (it takes no limit option)`;

/** `limits show|set|reset`: the operator's per-project and per-destination limits, in the database (a project cannot change its own). */
export const limitsCommand: Command = { usage: USAGE, actions: ['show', 'set', 'reset'], run: limits };

/** What a limit option takes: from `min` to `max`, a whole number unless `fractions`, and 0 too where `zero`. */
interface LimitRange {
  min: number;
  max: number;
  fractions?: boolean;
  zero?: boolean;
}

/** A number in `range`, or a usage error naming `option`. */
function limitValue(option: string, value: string | undefined, { min, max, fractions = false, zero = false }: LimitRange): number | undefined {
  if (value === undefined) return undefined;
  const number = (fractions ? /^\d+(\.\d+)?$/ : /^\d+$/).test(value) ? Number(value) : Number.NaN;
  if (!((number >= min && number <= max) || (zero && number === 0))) {
    throw new UsageError(`--${option} must be ${zero ? '0 or ' : ''}${fractions ? 'a number' : 'a whole number'} from ${min} to ${max}\n${USAGE}`);
  }
  return number;
}

/** The options that set a limit, as `limits set` takes them. */
const LIMIT_OPTIONS = ['max-in-flight', 'publish-rate', 'publish-burst', 'max-webhooks', 'recovery-rate'] as const;

/**
 * Refuses, as a usage error, a `--destination` that no webhook URL could name: `destinationOf`
 * reads a port only as far as its digits go and takes 443 for one it cannot read, so `host:8o80`
 * would become `host:8` and `host:abc` `host:443`.
 */
function checkDestination(value: string): void {
  const url = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value) ? value : `https://${value}`;
  if (!WebhookUrlSchema.safeParse(url).success || new URL(url).port === '0') {
    throw new UsageError(`--destination must be a host, host:port (a port from 1 to 65535) or https URL, as webhook URLs name them; not "${value}"`);
  }
}

const asJson = (row: StoredLimits) => ({
  scope: row.scope,
  name: row.name,
  max_in_flight: row.maxInFlight,
  ...(row.scope === 'project' && {
    publish_rate: row.publishRate,
    publish_burst: row.publishBurst,
    max_webhooks: row.maxWebhooks,
    recovery_rate: row.recoveryRate,
  }),
  updated_at: row.updatedAt.toISOString(),
});

async function limits(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      project: { type: 'string' },
      destination: { type: 'string' },
      'max-in-flight': { type: 'string' },
      'publish-rate': { type: 'string' },
      'publish-burst': { type: 'string' },
      'max-webhooks': { type: 'string' },
      'recovery-rate': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const overrides = {
    maxInFlight: limitValue('max-in-flight', values['max-in-flight'], { min: 1, max: 100_000 }),
    publishRate: limitValue('publish-rate', values['publish-rate'], { min: 0.01, max: 100_000, fractions: true }),
    publishBurst: limitValue('publish-burst', values['publish-burst'], { min: 1, max: 1_000_000 }),
    maxWebhooks: limitValue('max-webhooks', values['max-webhooks'], { min: 1, max: 1_000_000 }),
    recoveryRate: limitValue('recovery-rate', values['recovery-rate'], { min: 0.1, max: 1_000, fractions: true, zero: true }),
  };
  if (action !== 'show') {
    if ((values.project === undefined) === (values.destination === undefined)) throw new UsageError(`give one of --project and --destination\n${USAGE}`);
    if (values.project !== undefined && !PROJECT_ID.test(values.project)) throw new UsageError('--project must be 1-128 characters of A-Z a-z 0-9 . _ : @ -');
    // reset names what is stored, as `limits show` lists it (an earlier release may have stored what set now refuses).
    if (values.destination !== undefined && action === 'set') checkDestination(values.destination);
    const given = LIMIT_OPTIONS.filter((option) => values[option] !== undefined);
    if (action === 'reset' && given.length > 0) {
      throw new UsageError(`limits reset takes no limit (${given.map((option) => `--${option}`).join(', ')}): it removes all the limits of its own; to change one, use limits set\n${USAGE}`);
    }
    if (action === 'set' && given.length === 0) throw new UsageError(`limits set needs a limit to set, such as --max-in-flight 50\n${USAGE}`);
    if (values.destination !== undefined && given.some((option) => option !== 'max-in-flight')) {
      throw new UsageError(`a destination has --max-in-flight only\n${USAGE}`);
    }
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
        project_publish_rate: config.admission.publish.rate,
        project_publish_burst: config.admission.publish.burst,
        project_max_webhooks: config.admission.maxWebhooks,
        project_recovery_rate: config.flow.recoveryRate ?? 0,
      };
      if (values.json) {
        console.log(JSON.stringify({ defaults, overrides: stored.map(asJson) }));
        return;
      }
      console.log(Object.entries(defaults).map(([name, value]) => `${name.toUpperCase()}=${value}`).join('  '));
      printTable(stored.map(asJson), ['scope', 'name', 'max_in_flight', 'publish_rate', 'publish_burst', 'max_webhooks', 'recovery_rate', 'updated_at']);
      return;
    }
    const destination = values.destination === undefined ? undefined : await destinationOf(database.db, values.destination);
    if (values.destination !== undefined && destination === undefined) throw new UsageError(`--destination must be a host, host:port or URL, not "${values.destination}"`);
    const [scope, name] = destination ? (['destination', destination] as const) : (['project', values.project!] as const);
    if (action === 'set') {
      const stored =
        scope === 'project'
          ? await setProjectLimits(database.db, name, overrides)
          : await setDestinationLimits(database.db, name, { maxInFlight: overrides.maxInFlight });
      if (values.json) console.log(JSON.stringify(asJson(stored)));
      else {
        const set = Object.entries(asJson(stored)).filter(([key, value]) => !['scope', 'name', 'updated_at'].includes(key) && value !== null);
        console.log(`${scope} ${name}: ${set.map(([key, value]) => `${key}=${value}`).join(', ')} (the rest as configured).`);
        if (stored.publishRate !== null && stored.recoveryRate === null) {
          console.log(`Its endpoints' backlogs still recover at PROJECT_RECOVERY_RATE (${config.flow.recoveryRate ?? 0}/s, 0: not paced); --recovery-rate sets its own.`);
        }
      }
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
