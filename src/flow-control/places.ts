/**
 * Send capacity: a delivery's attempt sends only while it holds a place of each of its three
 * scopes, counted across every worker replica: its webhook (ENDPOINT_MAX_IN_FLIGHT; one while the
 * circuit breaker is open), its project (PROJECT_MAX_IN_FLIGHT) and its destination, the URL's
 * host and port (DESTINATION_MAX_IN_FLIGHT), the latter two overridable per project and per
 * destination by the operator. The webhook's `rate_limit` spaces the starts, as do an open
 * breaker's probe interval (CIRCUIT_BREAKER_PROBE_INTERVAL) and, for an endpoint's backlog once
 * its breaker closes, its project's recovery schedule (PROJECT_RECOVERY_RATE). A delivery that
 * must wait does so in its workflow (a durable wait that holds no worker slot and uses up no
 * attempt); giving places back wakes the next in line.
 * The rules live in the database functions of migrations 0011 and 0015 (as later ones redefine
 * them), so that every replica obeys one count; taking and giving back a place costs the same
 * however long the lines are, and no call waits for another that could wait for it.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../db/client.ts';
import type { SendScopeLevel } from '../db/schema.ts';

/** The limits every worker replica applies; from the configuration. */
export interface FlowLimits {
  /** Sends in flight to one webhook's endpoint at most (ENDPOINT_MAX_IN_FLIGHT). */
  webhookMaxInFlight: number;
  /** Sends in flight of one project's webhooks at most (PROJECT_MAX_IN_FLIGHT), unless the operator set the project's own. */
  projectMaxInFlight: number;
  /** Sends in flight to one destination host:port at most (DESTINATION_MAX_IN_FLIGHT), unless the operator set the destination's own. */
  destinationMaxInFlight: number;
  /** How long places are held for a send: past it, the hold lapses (its worker died, its request can no longer be running). */
  holdMs: number;
  /** How long a delivery woken for its turn is expected back, and a start time under a rate limit is kept for it. */
  reserveMs: number;
  /** Time between the starts of an open breaker's probes at least (CIRCUIT_BREAKER_PROBE_INTERVAL); absent or 0: one after another. */
  probeIntervalMs?: number;
  /**
   * Sends per second of a project's endpoints' backlogs once their circuit breakers close
   * (PROJECT_RECOVERY_RATE), together: a send of a delivery made before its webhook's breaker
   * last closed waits for its start on the project's recovery schedule. Absent or null: not paced.
   */
  recoveryRate?: number | null;
}

/** Why a send waits for a time rather than for its turn. */
export type TimedWaitReason =
  /** The webhook's rate limit gave it a later start. */
  | 'rate'
  /** It is of its endpoint's backlog, and its project's recovery schedule gave it a later start. */
  | 'recovery'
  /** The webhook's circuit breaker is open, and its next probe is due later. */
  | 'probe'
  /** An earlier attempt of the delivery holds its places and may still be sending (its worker stopped answering). */
  | 'attempt';

/** The answer to a request for places. */
export type PlaceDecision =
  | { decision: 'granted'; wake: string[] }
  /** A scope is full: wait in line there, behind `ahead` others (counted up to the scope's limit), until woken. */
  | { decision: 'wait_turn'; blocked: SendScopeLevel; ahead: number; wake: string[] }
  /** Wait `waitMs`, then ask again. */
  | { decision: 'wait_until'; reason: TimedWaitReason; waitMs: number; wake: string[] };

interface DecisionRow {
  decision: PlaceDecision['decision'];
  wait_ms: number;
  wait_reason: SendScopeLevel | TimedWaitReason | null;
  ahead: number;
  wake: string[];
}

/**
 * Asks for the places of `attempt` (an id of the send attempt, unique per activity attempt) of
 * `deliveryId`, in one round trip; `newRound` for the first attempt of a round (a manual retry
 * does not wait out a backoff its places were kept for). `wake` lists other deliveries this call
 * woke: their workflows must be signalled.
 */
export async function acquireSendPlaces(db: Database, deliveryId: string, attempt: string, limits: FlowLimits, newRound = false): Promise<PlaceDecision> {
  const [row] = await queryRows<DecisionRow>(
    db,
    sql`select decision, wait_ms, wait_reason, ahead, wake from acquire_send_places(${deliveryId}, ${attempt},
      ${limits.webhookMaxInFlight}, ${limits.projectMaxInFlight}, ${limits.destinationMaxInFlight}, ${limits.holdMs}, ${limits.reserveMs}, ${newRound},
      ${limits.recoveryRate ?? null}::float8, ${limits.probeIntervalMs ?? 0}::integer)`,
  );
  const { decision, wait_ms: waitMs, wait_reason: reason, ahead, wake } = row!;
  if (decision === 'wait_until') return { decision, reason: reason as TimedWaitReason, waitMs, wake };
  if (decision === 'wait_turn') return { decision, blocked: reason as SendScopeLevel, ahead, wake };
  return { decision, wake };
}

/**
 * How long a delivery waiting in line waits for its wake signal before it asks again. The signal
 * is the way in (each release wakes the next in line; a woken delivery that does not come back
 * is woken again by the next release); asking again covers a line where nobody releases any
 * more: every signal lost, every holder dead. So the head of a line asks again after 30 s, those
 * within the scope's limit of it after 2 minutes, the rest rarely, and a long line costs little.
 */
export function turnRecheckMs(decision: Extract<PlaceDecision, { decision: 'wait_turn' }>, limits: FlowLimits): number {
  const limit = { webhook: limits.webhookMaxInFlight, project: limits.projectMaxInFlight, destination: limits.destinationMaxInFlight }[decision.blocked];
  if (decision.ahead === 0) return 30_000;
  return decision.ahead < limit ? 2 * 60_000 : LONGEST_TURN_RECHECK_MS;
}

/**
 * The longest a delivery waiting in line goes before asking again. What it holds while it waits
 * (a rate-limited send's webhook place) is held a minute longer past each ask (migration 0017).
 */
export const LONGEST_TURN_RECHECK_MS = 15 * 60_000;

/**
 * Gives back the places of `attempt` of `deliveryId` (`null`: those kept or reserved for its next
 * attempt), and its place in line; returns the deliveries to wake. With `keepForMs` (the attempt
 * timed out and the delivery's next attempt comes after that backoff) the places stay the
 * delivery's, reserved for that attempt, and nobody is woken.
 */
export async function releaseSendPlaces(
  db: Database,
  deliveryId: string,
  attempt: string | null,
  limits: Pick<FlowLimits, 'reserveMs'>,
  keepForMs?: number,
): Promise<string[]> {
  const [row] = await queryRows<{ wake: string[] }>(
    db,
    sql`select release_send_places(${deliveryId}, ${attempt}, ${limits.reserveMs}, ${keepForMs === undefined ? null : Math.ceil(keepForMs)}::integer) as wake`,
  );
  return row!.wake;
}

/**
 * Gives back everything a delivery whose workflow has closed still holds for a next attempt: its
 * place in line and the places kept or reserved for it (which would otherwise stay idle until
 * their hold lapses); returns the deliveries to wake.
 */
export function releaseClosedDelivery(db: Database, deliveryId: string, limits: Pick<FlowLimits, 'reserveMs'>): Promise<string[]> {
  return releaseSendPlaces(db, deliveryId, null, limits);
}

/**
 * Wakes the heads of lines nobody will wake: a line whose head is not woken (or was woken and
 * did not come back in time) while a place of the scope it waits for is free, within that
 * scope's limit (`send_scope_limits`: a place the open breaker or the operator's lower limit
 * leaves unused is free for nobody). That happens when the one who should have woken it is gone:
 * a worker that died holding places (they lapse, and a lapse wakes nobody) or between a release
 * and its wake signal. Heads that have waited at least `minWaitMs`, at most `limit`, shared fairly
 * among projects (each project's longest-waiting head first, then each one's second…), so a
 * project with many forgotten lines does not hold another's back for a run; each is marked woken
 * for `reserveMs`. Returns the deliveries to signal.
 */
export async function wakeForgottenLineHeads(db: Database, limits: FlowLimits, minWaitMs: number, limit: number): Promise<string[]> {
  const rows = await queryRows<{ delivery_id: string }>(
    db,
    sql`with heads as (
          select distinct on (webhook_id) delivery_id, webhook_id, project_id, destination, blocked, blocked_since, woken_until
          from send_waiters order by webhook_id, seq
        ), forgotten as (
          select h.delivery_id, h.blocked_since, row_number() over (partition by h.project_id order by h.blocked_since) as project_rank
          from heads h
          join webhooks hook on hook.id = h.webhook_id
          where (h.woken_until is null or h.woken_until < now())
            and h.blocked_since < now() - make_interval(secs => ${minWaitMs / 1000}::float8)
            and exists (
              select 1 from send_places p
              where p.expires_at < now()
                and p.scope = case h.blocked when 'webhook' then 'w:' || h.webhook_id when 'project' then 'p:' || h.project_id else 'd:' || h.destination end
                and p.slot <= (send_scope_limits(hook.circuit_opened_at is not null, h.project_id, h.destination,
                  ${limits.webhookMaxInFlight}::integer, ${limits.projectMaxInFlight}::integer, ${limits.destinationMaxInFlight}::integer))[
                  case h.blocked when 'webhook' then 1 when 'project' then 2 else 3 end])
        ), chosen as (
          select delivery_id from forgotten order by project_rank, blocked_since limit ${limit}
        )
        update send_waiters w set woken_until = now() + make_interval(secs => ${limits.reserveMs / 1000}::float8)
        from chosen c where w.delivery_id = c.delivery_id
        returning w.delivery_id`,
  );
  return rows.map((row) => row.delivery_id);
}
