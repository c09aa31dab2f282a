/**
 * The retention sweep: deletes what is past the retention period, in bounded batches of short
 * statements (no long transaction, no table lock; rows being changed are skipped, not waited
 * for). Between batches it carries only a position (which phase, which event it reached), so a
 * sweep interrupted at any point is finished by the next one, and running it twice deletes
 * nothing more. What it never deletes:
 *
 * - a delivery that is `pending`, `processing` or `failed` (its workflow is running);
 * - a `dead_letter` delivery younger than the dead-letter wait plus a day (its workflow may
 *   still be waiting for a retry), whatever the period;
 * - an event that still has a delivery.
 *
 * Last, it erases the secrets rotations replaced whose grace period has ended (they sign nothing
 * after it already).
 */
import { sql, type SQL } from 'drizzle-orm';
import { queryRows, type Database } from '../db/client.ts';
import { eraseExpiredPreviousSecrets } from '../db/queries/webhooks.ts';
import { DEAD_LETTER_WAIT_MS } from '../../workflows/delivery.ts';

/** Rows per statement: small enough to keep each statement short under load. */
export const SWEEP_BATCH_SIZE = 1_000;

/** A dead-lettered delivery's record outlives the longest its workflow can wait for a retry, by a day. */
export const DEAD_LETTER_MIN_AGE_MS = DEAD_LETTER_WAIT_MS + 24 * 60 * 60 * 1000;

/** The instants before which each kind of row is past retention. */
export interface SweepCutoffs {
  /** The sweep's "now": previous secrets that expired before it are erased. */
  now: Date;
  /** `delivered` deliveries last changed before it, and events created before it. */
  before: Date;
  /** `dead_letter` deliveries last changed before it (never later than now minus {@link DEAD_LETTER_MIN_AGE_MS}). */
  deadLetterBefore: Date;
}

export function sweepCutoffs(now: Date, olderThanMs: number): SweepCutoffs {
  return {
    now,
    before: new Date(now.getTime() - olderThanMs),
    deadLetterBefore: new Date(now.getTime() - Math.max(olderThanMs, DEAD_LETTER_MIN_AGE_MS)),
  };
}

/** What one batch, or a whole sweep, deleted. */
export interface SweepCounts {
  deliveries: number;
  events: number;
  /** Replaced signing secrets erased after their grace period. */
  previousSecrets: number;
}

/**
 * Where a sweep is: deleting deliveries (first, until none past the period is left), then
 * deleting events, after the last event it looked at, then erasing expired previous secrets. A
 * sweep starts in the deliveries phase; a position lost in a crash costs only a re-scan, never a
 * wrong deletion.
 */
export type SweepPosition =
  | { phase: 'deliveries' }
  | { phase: 'events'; after?: { createdAt: string; id: string } }
  | { phase: 'previous_secrets' };

/** One batch's outcome: what it deleted and where the sweep goes on, or `next` undefined when it is done. */
export interface SweepStep extends SweepCounts {
  next?: SweepPosition;
}

/**
 * The statement of a deliveries batch: deletes up to `batchSize` settled deliveries past
 * retention, the delivered ones first. Each status is read along its own range of
 * `deliveries_settled_by_status_idx`, so a batch reads what it deletes, never the dead letters it
 * keeps that are older than delivered rows it deletes (a period under the dead-letter wait).
 */
export function settledDeliveriesBatch(cutoffs: SweepCutoffs, batchSize: number): SQL {
  return sql`
    with delivered as (
      select id from deliveries
      where status = 'delivered' and updated_at < ${cutoffs.before.toISOString()}::timestamptz
      order by status, updated_at
      limit ${batchSize}
      for update skip locked
    ),
    dead_letters as (
      select id from deliveries
      where status = 'dead_letter' and updated_at < ${cutoffs.deadLetterBefore.toISOString()}::timestamptz
      order by status, updated_at
      limit ${batchSize}
      for update skip locked
    )
    -- Read on demand: the dead letters only for what the delivered rows leave of the batch.
    delete from deliveries
    using (select id from delivered union all select id from dead_letters limit ${batchSize}) as doomed
    where deliveries.id = doomed.id
    returning deliveries.id`;
}

/**
 * One bounded batch of the sweep at `position`. In the deliveries phase:
 * {@link settledDeliveriesBatch} (their attempts go with them, by the foreign key's cascade).
 * In the events phase: looks at the next `batchSize` events past retention, in (created_at, id)
 * order after `position.after`, and deletes those with no delivery left; the others keep a
 * delivery that is not swept, so the next batch starts after them instead of reading them again.
 */
export async function sweepBatch(db: Database, cutoffs: SweepCutoffs, position: SweepPosition, batchSize = SWEEP_BATCH_SIZE): Promise<SweepStep> {
  const before = cutoffs.before.toISOString();
  if (position.phase === 'deliveries') {
    const deleted = await queryRows<{ id: string }>(db, settledDeliveriesBatch(cutoffs, batchSize));
    return { deliveries: deleted.length, events: 0, previousSecrets: 0, next: deleted.length < batchSize ? { phase: 'events' } : position };
  }
  if (position.phase === 'previous_secrets') {
    const erased = await eraseExpiredPreviousSecrets(db, cutoffs.now, batchSize);
    return { deliveries: 0, events: 0, previousSecrets: erased, ...(erased === batchSize && { next: position }) };
  }
  const after = position.after ? sql`and (created_at, id) > (${position.after.createdAt}::timestamptz, ${position.after.id})` : sql``;
  // created_at travels as PostgreSQL's text, microseconds included, so the cursor is exact.
  const candidates = await queryRows<{ id: string; created_at: string; kept: boolean }>(
    db,
    sql`
      select id, created_at::text as created_at, exists (select 1 from deliveries where deliveries.event_id = events.id) as kept
      from events
      where created_at < ${before}::timestamptz ${after}
      order by created_at, id
      limit ${batchSize}`,
  );
  const doomed = candidates.filter((event) => !event.kept).map((event) => event.id);
  const deleted =
    doomed.length === 0
      ? []
      : await queryRows<{ id: string }>(
          db,
          sql`
            with doomed as (
              select id from events
              where id in (${sql.join(doomed.map((id) => sql`${id}`), sql`, `)})
                and not exists (select 1 from deliveries where deliveries.event_id = events.id)
              for update skip locked
            )
            delete from events using doomed where events.id = doomed.id
            returning events.id`,
        );
  const last = candidates.at(-1);
  if (candidates.length === batchSize && last) {
    return { deliveries: 0, events: deleted.length, previousSecrets: 0, next: { phase: 'events', after: { createdAt: last.created_at, id: last.id } } };
  }
  // The events are done: the secrets' first batch runs in this one, so a sweep with none to erase costs no batch more.
  const erased = await eraseExpiredPreviousSecrets(db, cutoffs.now, batchSize);
  return { deliveries: 0, events: deleted.length, previousSecrets: erased, ...(erased === batchSize && { next: { phase: 'previous_secrets' } }) };
}

/**
 * After each batch the sweep rests as long as the batch took, so it never holds the database
 * more than half the time: deliveries keep their latency while it runs (docs/performance.md).
 */
export const SWEEP_REST_RATIO = 1;

/** {@link sweepBatch}, then the rest of {@link SWEEP_REST_RATIO} times its duration. */
export async function pacedSweepBatch(
  db: Database,
  cutoffs: SweepCutoffs,
  position: SweepPosition,
  batchSize = SWEEP_BATCH_SIZE,
  restRatio = SWEEP_REST_RATIO,
): Promise<SweepStep> {
  const started = performance.now();
  const step = await sweepBatch(db, cutoffs, position, batchSize);
  if (step.next && restRatio > 0) await new Promise((resolve) => setTimeout(resolve, (performance.now() - started) * restRatio));
  return step;
}

/** Runs paced batches from the start until the sweep is done; `onBatch` sees each batch. */
export async function sweepAll(
  db: Database,
  cutoffs: SweepCutoffs,
  options: { batchSize?: number; restRatio?: number; onBatch?: (step: SweepStep) => void } = {},
): Promise<SweepCounts> {
  const total: SweepCounts = { deliveries: 0, events: 0, previousSecrets: 0 };
  for (let position: SweepPosition | undefined = { phase: 'deliveries' }; position; ) {
    const step = await pacedSweepBatch(db, cutoffs, position, options.batchSize, options.restRatio);
    total.deliveries += step.deliveries;
    total.events += step.events;
    total.previousSecrets += step.previousSecrets;
    options.onBatch?.(step);
    position = step.next;
  }
  return total;
}
