import { parseArgs } from 'node:util';
import { SHORTEST_RETENTION_PERIOD_MS, type Config } from '../config.ts';
import { formatDuration, parseDuration } from '../duration.ts';
import { sweepAll, sweepCutoffs, SWEEP_BATCH_SIZE } from '../retention/sweep.ts';
import { connectDatabase } from './database.ts';
import { UsageError, type Command } from './output.ts';

const USAGE = `usage: retention run [--older-than <duration>] [--batch-size <n>] [--json]
  Deletes at once, in batches, what the scheduled retention sweep deletes: delivered deliveries
  (with their attempts) and events past the period (RETENTION_PERIOD unless --older-than, e.g.
  30d, 12h; 1h at least); dead-lettered deliveries only once their workflow cannot wait for a retry any more
  (8 days); never a pending, processing or failed one. Safe to interrupt and to run again.`;

/** `retention run`: the retention sweep, now, from the command line. */
export const retentionCommand: Command = { usage: USAGE, actions: ['run'], run: sweep };

async function sweep(config: Config, args: string[]): Promise<void> {
  const rest = args.slice(1);
  const { values } = parseArgs({
    args: rest,
    options: {
      'older-than': { type: 'string' },
      'batch-size': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const olderThanMs = values['older-than'] === undefined ? config.retention.periodMs : parseDuration(values['older-than']);
  if (olderThanMs === undefined || olderThanMs < SHORTEST_RETENTION_PERIOD_MS) {
    throw new UsageError(`--older-than must be a duration of at least ${formatDuration(SHORTEST_RETENTION_PERIOD_MS)}, such as 30d, 12h or 90m\n${USAGE}`);
  }
  const batchSize = values['batch-size'] === undefined ? SWEEP_BATCH_SIZE : Number(values['batch-size']);
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000) throw new UsageError(`--batch-size must be a whole number from 1 to 100000\n${USAGE}`);

  const database = await connectDatabase(config);
  try {
    const cutoffs = sweepCutoffs(new Date(), olderThanMs);
    const started = Date.now();
    let batches = 0;
    const deleted = await sweepAll(database.db, cutoffs, {
      batchSize,
      onBatch: (counts) => {
        batches += 1;
        if (!values.json && batches % 20 === 0) console.error(`… ${batches} batches (last: ${counts.deliveries} deliveries, ${counts.events} events)`);
      },
    });
    const seconds = (Date.now() - started) / 1000;
    if (values.json) {
      console.log(
        JSON.stringify({
          older_than: formatDuration(olderThanMs),
          before: cutoffs.before.toISOString(),
          dead_letter_before: cutoffs.deadLetterBefore.toISOString(),
          deleted: { deliveries: deleted.deliveries, events: deleted.events, previous_secrets: deleted.previousSecrets },
          batches,
          seconds,
        }),
      );
    } else {
      console.log(
        `Deleted ${deleted.deliveries} deliveries (with their attempts) and ${deleted.events} events older than ${formatDuration(olderThanMs)} ` +
          `(dead letters older than ${cutoffs.deadLetterBefore.toISOString()}), and erased ${deleted.previousSecrets} replaced signing secrets ` +
          `past their grace period, in ${batches} batches, ${seconds.toFixed(1)} s.`,
      );
    }
  } finally {
    await database.close();
  }
}
