import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';

/**
 * What `/metrics` reads from the database at each scrape: the state of the whole installation,
 * the same figures whichever replica reads them.
 */
export interface ScrapedFigures {
  /** Active webhooks whose circuit breaker is open. */
  openCircuits: number;
  /** Seconds since the longest-open of those breakers opened; 0 when none is open. */
  oldestOpenCircuitSeconds: number;
  /** Events accepted whose delivery workflows are not all started yet (the outbox). */
  undispatchedEvents: number;
  /** Seconds since the oldest of those events was accepted; 0 when there is none. */
  oldestUndispatchedSeconds: number;
}

/**
 * Reads {@link ScrapedFigures} in one statement. Ages are taken on the database's clock, so every
 * replica reports the same. Each part walks a partial index (`events_undispatched_idx`,
 * `webhooks_open_circuit_idx`), so a scrape costs the outbox and the open breakers, not the
 * number of events or customer endpoints.
 */
export async function readScrapedFigures(db: Database): Promise<ScrapedFigures> {
  const [row] = await queryRows<ScrapedFigures>(
    db,
    sql`with open_circuits as (
          select count(*)::int as count, min(circuit_opened_at) as oldest
          from webhooks where circuit_opened_at is not null and status = 'active'
        ), undispatched as (
          select count(*)::int as count, min(created_at) as oldest
          from events where dispatched_at is null
        )
        select open_circuits.count as "openCircuits",
               coalesce(extract(epoch from now() - open_circuits.oldest), 0)::float8 as "oldestOpenCircuitSeconds",
               undispatched.count as "undispatchedEvents",
               coalesce(extract(epoch from now() - undispatched.oldest), 0)::float8 as "oldestUndispatchedSeconds"
        from open_circuits, undispatched`,
  );
  return row!;
}
