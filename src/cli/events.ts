import { Client, Connection } from '@temporalio/client';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { publishEvent } from '../events/publish.ts';
import { PublishEventSchema } from '../events/schema.ts';
import { describeZodError } from '../api/validation.ts';
import { DeliveryScheduler } from '../temporal/scheduler.ts';
import { connectDatabase } from './database.ts';
import { CliError } from './output.ts';

const USAGE = 'usage: events publish --project <id> --data-file <file.json> [--id <idempotency key>] [--occurred-at <ISO 8601>] [--json]';

/** `events publish`: hands an event to the service in-process, as `publishEvent()` does. */
export async function eventsCommand(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  if (action !== 'publish') throw new CliError(USAGE);
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
  if (!values.project || !values['data-file']) throw new CliError(USAGE);
  let data: unknown;
  try {
    data = JSON.parse(await readFile(values['data-file'], 'utf8'));
  } catch (error) {
    throw new CliError(`cannot read ${values['data-file']} as JSON: ${(error as Error).message}`);
  }
  const parsed = PublishEventSchema.safeParse({
    ...(values.id ? { id: values.id } : {}),
    project_id: values.project,
    event: 'docauth.completed',
    ...(values['occurred-at'] ? { occurred_at: values['occurred-at'] } : {}),
    data,
  });
  if (!parsed.success) throw new CliError(`invalid event: ${describeZodError(parsed.error)}`);

  const database = await connectDatabase(config);
  const address = config.temporal.address ?? `127.0.0.1:${config.temporal.port}`;
  let connection: Connection;
  try {
    connection = await Connection.connect({ address, connectTimeout: 5_000 });
  } catch (error) {
    await database.close();
    throw new CliError(`cannot reach Temporal at ${address}: ${(error as Error).message}`);
  }
  try {
    const scheduler = new DeliveryScheduler(
      new Client({ connection, namespace: config.temporal.namespace }),
      config.temporal.taskQueue,
    );
    const published = await publishEvent({ db: database.db, scheduler }, parsed.data);
    if (values.json) {
      console.log(JSON.stringify({ event_id: published.eventId, delivery_ids: published.deliveryIds, created: published.created }));
    } else {
      console.log(
        `${published.created ? 'Published' : 'Already published'} event ${published.eventId}: ` +
          `${published.deliveryIds.length} deliver${published.deliveryIds.length === 1 ? 'y' : 'ies'}` +
          (published.deliveryIds.length ? ` (${published.deliveryIds.join(', ')})` : ''),
      );
    }
  } finally {
    await connection.close();
    await database.close();
  }
}
