import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { ConfigError, type Config } from '../config.ts';
import { EventNotDispatchedError, publishEvent, type PublishedEvent } from '../events/publish.ts';
import { PublishEventSchema } from '../events/schema.ts';
import { describeZodError } from '../api/validation.ts';
import { loadSecretBox } from '../secrets/installation.ts';
import { connectCommandClient } from '../temporal/clients.ts';
import { DeliveryScheduler } from '../temporal/scheduler.ts';
import { eraseEventPayloads } from '../db/queries/events.ts';
import { connectDatabase } from './database.ts';
import { CliError, UsageError, type Command } from './output.ts';

const PUBLISH_USAGE = 'usage: events publish --project <id> --data-file <file.json> [--id <idempotency key>] [--occurred-at <ISO 8601>] [--json]';
const PURGE_USAGE = `usage: events purge --project <id> (--id <producer event id> | --request-id <data.request_id>) [--json]
  Erases the data of the matching events at once (a data-subject request): their deliveries keep
  their metadata; a delivery not yet sent ends dead_letter instead of sending the erased data.`;
const USAGE = `${PUBLISH_USAGE}\n${PURGE_USAGE}`;

/** `events publish | purge`. */
export const eventsCommand: Command = {
  usage: USAGE,
  actions: ['publish', 'purge'],
  run: (config, [action, ...rest]) => (action === 'publish' ? publish(config, rest) : purge(config, rest)),
};

/** `events purge`: erases events' payloads, found by producer id or by `data.request_id`. */
async function purge(config: Config, rest: string[]): Promise<void> {
  const { values } = parseArgs({
    args: rest,
    options: {
      project: { type: 'string' },
      id: { type: 'string' },
      'request-id': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (!values.project || Boolean(values.id) === Boolean(values['request-id'])) throw new UsageError(PURGE_USAGE);
  const secretBox = await loadSecretBox(config);
  const database = await connectDatabase(config);
  try {
    const match = values.id ? { producerEventId: values.id } : { requestId: values['request-id']! };
    const erased = await eraseEventPayloads(database.db, secretBox, values.project, match);
    if (values.json) {
      console.log(
        JSON.stringify({
          erased: erased.map((event) => ({
            event_id: event.eventId,
            id: event.producerEventId,
            erased_at: event.erasedAt.toISOString(),
            delivery_ids: event.deliveryIds,
          })),
        }),
      );
    } else if (erased.length === 0) {
      console.log(`No event of project ${values.project} matches; nothing erased.`);
    } else {
      for (const event of erased) {
        console.log(`Erased the data of event ${event.eventId} (id ${event.producerEventId}) at ${event.erasedAt.toISOString()}; its ${event.deliveryIds.length} deliver${event.deliveryIds.length === 1 ? 'y keeps' : 'ies keep'} their metadata.`);
      }
    }
  } finally {
    await database.close();
  }
}

/** The options of `events publish` that are fields of the event, each checked as the producers' door checks its field. */
const EVENT_FIELD_OPTIONS = [
  ['project', 'project_id'],
  ['id', 'id'],
  ['occurred-at', 'occurred_at'],
] as const;

/** `events publish`: hands an event to the service in-process, as `publishEvent()` does. */
async function publish(config: Config, rest: string[]): Promise<void> {
  const { values } = parseArgs({
    args: rest,
    options: {
      project: { type: 'string' },
      'data-file': { type: 'string' },
      id: { type: 'string' },
      'occurred-at': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (!values.project || !values['data-file']) throw new UsageError(PUBLISH_USAGE);
  for (const [option, field] of EVENT_FIELD_OPTIONS) {
    const value = values[option];
    const checked = value === undefined ? undefined : PublishEventSchema.shape[field].safeParse(value);
    if (checked?.success === false) throw new UsageError(`--${option} ${checked.error.issues[0]!.message}, not "${value}"\n${PUBLISH_USAGE}`);
  }
  // Chosen here rather than by the service, so that after a failure the operator can publish the
  // same event again (`--id`) instead of a second one.
  const id = values.id ?? randomUUID();
  let data: unknown;
  try {
    data = JSON.parse(await readFile(values['data-file'], 'utf8'));
  } catch (error) {
    throw new CliError(`cannot read ${values['data-file']} as JSON: ${(error as Error).message}`);
  }
  const parsed = PublishEventSchema.safeParse({
    id,
    project_id: values.project,
    event: 'docauth.completed',
    ...(values['occurred-at'] ? { occurred_at: values['occurred-at'] } : {}),
    data,
  });
  if (!parsed.success) throw new CliError(`invalid event: ${describeZodError(parsed.error)}`);

  const secretBox = await loadSecretBox(config);
  const database = await connectDatabase(config);
  const address = config.temporal.address ?? `127.0.0.1:${config.temporal.port}`;
  let temporal: Awaited<ReturnType<typeof connectCommandClient>>;
  try {
    temporal = await connectCommandClient({ address, settings: config.temporal, namespace: config.temporal.namespace }, 5_000);
  } catch (error) {
    await database.close();
    if (error instanceof ConfigError) throw error;
    throw new CliError(`cannot reach Temporal at ${address}: ${(error as Error).message}`);
  }
  try {
    const scheduler = new DeliveryScheduler(temporal.client, config.temporal.taskQueue);
    let published: PublishedEvent;
    try {
      published = await publishEvent({ db: database.db, scheduler, secretBox }, parsed.data);
    } catch (error) {
      if (!(error instanceof EventNotDispatchedError)) {
        throw new CliError(`could not publish the event (id ${id}): ${(error as Error).message}. Run again with --id ${id}: an event stored under that id is not published twice`);
      }
      const { deliveryIds } = error.event;
      throw new CliError(
        `the event of project ${values.project} with id ${id} is stored with ${deliveryIds.length} deliver${deliveryIds.length === 1 ? 'y' : 'ies'} (${deliveryIds.join(', ')}), ` +
          `but publishing it did not finish: ${error.reason}. The service's repair check starts any of their workflows not started on one of its next runs ` +
          `(every REPAIR_INTERVAL) once its worker reaches Temporal; to do it now, fix the cause and run again with --id ${id} (the same id publishes nothing twice)`,
      );
    }
    if (values.json) {
      console.log(JSON.stringify({ event_id: published.eventId, id, delivery_ids: published.deliveryIds, created: published.created }));
    } else {
      console.log(
        `${published.created ? 'Published' : 'Already published'} event ${published.eventId} (id ${id}): ` +
          `${published.deliveryIds.length} deliver${published.deliveryIds.length === 1 ? 'y' : 'ies'}` +
          (published.deliveryIds.length ? ` (${published.deliveryIds.join(', ')})` : ''),
      );
    }
  } finally {
    await temporal.close();
    await database.close();
  }
}
