import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';
import { SEND_SCOPE_LEVELS, type SendScopeLevel } from '../schema.ts';

/** The configured send limits, which scopes without an override of the operator's have. */
export interface DefaultSendLimits {
  webhookMaxInFlight: number;
  projectMaxInFlight: number;
  destinationMaxInFlight: number;
}

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
  /** Sends in flight in the whole installation (places of a destination held by an attempt sending now). */
  sendsInFlight: number;
  /** Webhooks, projects and destinations whose places are all held now. */
  scopesAtCapacity: Record<SendScopeLevel, number>;
  /** Deliveries waiting for places, by the level they wait at. */
  sendsWaiting: Record<SendScopeLevel, number>;
}

/**
 * Reads {@link ScrapedFigures} in one statement. Ages are taken on the database's clock, so every
 * replica reports the same. The breakers and the outbox walk partial indexes
 * (`webhooks_open_circuit_idx`, `events_undispatched_idx`) and the places held walk
 * `send_places_delivery_idx`, so those cost what is open, waiting or in flight, not the number of
 * events or customer endpoints; the waiting deliveries are counted one by one (an index-only
 * count, about 10 ms per 100,000 waiting).
 */
export async function readScrapedFigures(db: Database, limits: DefaultSendLimits): Promise<ScrapedFigures> {
  const [row] = await queryRows<Omit<ScrapedFigures, 'scopesAtCapacity' | 'sendsWaiting'> & { atCapacity: number[]; waiting: number[] }>(
    db,
    sql`with open_circuits as (
          select count(*)::int as count, min(circuit_opened_at) as oldest
          from webhooks where circuit_opened_at is not null and status = 'active'
        ), undispatched as (
          select count(*)::int as count, min(created_at) as oldest
          from events where dispatched_at is null
        ), held as (
          select scope, count(*)::int as held, (count(*) filter (where attempt is not null))::int as sending
          from send_places where delivery_id is not null and expires_at >= now()
          group by scope
        ), held_by_level as (
          select left(held.scope, 1) as level, held.held, held.sending,
            case left(held.scope, 1)
              when 'w' then (select case when w.circuit_opened_at is null then ${limits.webhookMaxInFlight}::int else 1 end
                             from webhooks w where w.id = substr(held.scope, 3))
              when 'p' then coalesce((select l.max_in_flight from project_limits l where l.project_id = substr(held.scope, 3)), ${limits.projectMaxInFlight}::int)
              else coalesce((select l.max_in_flight from destination_limits l where l.destination = substr(held.scope, 3)), ${limits.destinationMaxInFlight}::int)
            end as capacity
          from held
        ), waiting as (
          select blocked, count(*)::int as count from send_waiters group by blocked
        )
        select open_circuits.count as "openCircuits",
               coalesce(extract(epoch from now() - open_circuits.oldest), 0)::float8 as "oldestOpenCircuitSeconds",
               undispatched.count as "undispatchedEvents",
               coalesce(extract(epoch from now() - undispatched.oldest), 0)::float8 as "oldestUndispatchedSeconds",
               (select coalesce(sum(sending), 0)::int from held_by_level where level = 'd') as "sendsInFlight",
               array[(select count(*)::int from held_by_level where level = 'w' and held >= capacity),
                     (select count(*)::int from held_by_level where level = 'p' and held >= capacity),
                     (select count(*)::int from held_by_level where level = 'd' and held >= capacity)] as "atCapacity",
               array[coalesce((select count from waiting where blocked = 'webhook'), 0),
                     coalesce((select count from waiting where blocked = 'project'), 0),
                     coalesce((select count from waiting where blocked = 'destination'), 0)] as "waiting"
        from open_circuits, undispatched`,
  );
  const { atCapacity, waiting, ...figures } = row!;
  const byLevel = (counts: number[]) => Object.fromEntries(SEND_SCOPE_LEVELS.map((level, i) => [level, counts[i]!])) as Record<SendScopeLevel, number>;
  return { ...figures, scopesAtCapacity: byLevel(atCapacity), sendsWaiting: byLevel(waiting) };
}
