/**
 * The retention sweep: deletes what is past the retention period, in bounded batches of short
 * statements (no long transaction, no table lock; rows being changed are skipped, not waited
 * for). It keeps no state between batches, so a sweep interrupted at any point is finished by
 * the next one, and running it twice deletes nothing more. What it never deletes:
 *
 * - a delivery that is `pending`, `processing` or `failed` (its workflow is running);
 * - a `dead_letter` delivery younger than the dead-letter wait plus a day (its workflow may
 *   still be waiting for a retry), whatever the period;
 * - an event that still has a delivery.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../db/client.ts';
import { DEAD_LETTER_WAIT_MS } from '../../workflows/delivery.ts';

/** Rows per statement: small enough to keep each statement short under load. */
export const SWEEP_BATCH_SIZE = 1_000;

/** A dead-lettered delivery's record outlives the longest its workflow can wait for a retry, by a day. */
export const DEAD_LETTER_MIN_AGE_MS = DEAD_LETTER_WAIT_MS + 24 * 60 * 60 * 1000;

/** The instants before which each kind of row is past retention. */
export interface SweepCutoffs {
  /** `delivered` deliveries last changed before it, and events created before it. */
  before: Date;
  /** `dead_letter` deliveries last changed before it (never later than now minus {@link DEAD_LETTER_MIN_AGE_MS}). */
  deadLetterBefore: Date;
}

export function sweepCutoffs(now: Date, olderThanMs: number): SweepCutoffs {
  return {
    before: new Date(now.getTime() - olderThanMs),
    deadLetterBefore: new Date(now.getTime() - Math.max(olderThanMs, DEAD_LETTER_MIN_AGE_MS)),
  };
}

/** What one batch, or a whole sweep, deleted. */
export interface SweepCounts {
  deliveries: number;
  events: number;
}

/**
 * Deletes up to `batchSize` deliveries past retention (their attempts go with them, by the
 * foreign key's cascade), then up to `batchSize` events past retention that have no delivery
 * left. Returns how many of each; a batch that deletes fewer than `batchSize` of both means the
 * sweep is done.
 */
export async function sweepBatch(db: Database, cutoffs: SweepCutoffs, batchSize = SWEEP_BATCH_SIZE): Promise<SweepCounts> {
  const before = cutoffs.before.toISOString();
  const deadLetterBefore = cutoffs.deadLetterBefore.toISOString();
  const latest = before > deadLetterBefore ? before : deadLetterBefore;
  const deliveries = await queryRows<{ id: string }>(
    db,
    sql`
      with doomed as (
        select id from deliveries
        where status in ('delivered', 'dead_letter') and updated_at < ${latest}::timestamptz
          and ((status = 'delivered' and updated_at < ${before}::timestamptz)
            or (status = 'dead_letter' and updated_at < ${deadLetterBefore}::timestamptz))
        order by updated_at
        limit ${batchSize}
        for update skip locked
      )
      delete from deliveries using doomed where deliveries.id = doomed.id
      returning deliveries.id`,
  );
  const events = await queryRows<{ id: string }>(
    db,
    sql`
      with doomed as (
        select id from events
        where created_at < ${before}::timestamptz
          and not exists (select 1 from deliveries where deliveries.event_id = events.id)
        order by created_at
        limit ${batchSize}
        for update skip locked
      )
      delete from events using doomed where events.id = doomed.id
      returning events.id`,
  );
  return { deliveries: deliveries.length, events: events.length };
}

/** True when a batch found less than a full batch of either kind: nothing more is due. */
export const sweepDone = (counts: SweepCounts, batchSize: number) => counts.deliveries < batchSize && counts.events < batchSize;

/** Runs batches until nothing is due; `onBatch` sees each batch's counts. */
export async function sweepAll(
  db: Database,
  cutoffs: SweepCutoffs,
  options: { batchSize?: number; onBatch?: (counts: SweepCounts) => void } = {},
): Promise<SweepCounts> {
  const batchSize = options.batchSize ?? SWEEP_BATCH_SIZE;
  const total: SweepCounts = { deliveries: 0, events: 0 };
  for (;;) {
    const counts = await sweepBatch(db, cutoffs, batchSize);
    total.deliveries += counts.deliveries;
    total.events += counts.events;
    options.onBatch?.(counts);
    if (sweepDone(counts, batchSize)) return total;
  }
}
