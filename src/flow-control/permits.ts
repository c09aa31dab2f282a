/**
 * Flow control of the sends to one customer endpoint: a delivery's attempt starts only while it
 * holds one of its webhook's places (ENDPOINT_MAX_IN_FLIGHT; one while the circuit breaker is
 * open), and the webhook's `rate_limit` spaces the starts. A delivery that must wait does so in
 * its workflow (a durable wait that holds no worker slot and uses up no attempt); the release of
 * a place wakes the next in line. The rules live in the database functions of migration 0005,
 * so that every worker replica obeys one count.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../db/client.ts';

/** The limits every worker replica applies; from the configuration. */
export interface FlowLimits {
  /** Sends in flight to one webhook's endpoint at most (ENDPOINT_MAX_IN_FLIGHT). */
  maxInFlight: number;
  /** How long a place is held for a send: past it, the hold lapses (its worker died). */
  holdMs: number;
  /** How long a place given to a waiting delivery is kept for it before it lapses. */
  reserveMs: number;
}

/** The answer to a request for a place. */
export type PermitDecision =
  | { decision: 'granted'; wake: string[] }
  /** No place is free: wait in line, behind `ahead` others, until woken. */
  | { decision: 'wait_turn'; ahead: number; wake: string[] }
  /** A place is held; the rate limit lets the send start in `waitMs`. */
  | { decision: 'wait_until'; waitMs: number; wake: string[] };

interface DecisionRow {
  decision: PermitDecision['decision'];
  wait_ms: number;
  ahead: number;
  wake: string[];
}

/**
 * Asks for a place for the next attempt of `deliveryId` (one round trip). `wake` lists other
 * deliveries this call gave a place to (freed by holds that lapsed): their workflows must be woken.
 */
export async function acquireSendPermit(db: Database, deliveryId: string, limits: FlowLimits): Promise<PermitDecision> {
  const [row] = await queryRows<DecisionRow>(
    db,
    sql`select decision, wait_ms, ahead, wake from acquire_send_permit(${deliveryId}, ${limits.maxInFlight}, ${limits.holdMs}, ${limits.reserveMs})`,
  );
  const { decision, wait_ms: waitMs, ahead, wake } = row!;
  if (decision === 'wait_until') return { decision, waitMs, wake };
  return decision === 'wait_turn' ? { decision, ahead, wake } : { decision, wake };
}

/**
 * How long a delivery waiting in line waits for its wake signal before it asks again. The signal
 * is the way in; asking again covers a signal that was lost (its sender died) and a place whose
 * holder died. Those near the head of the line ask again soon, the others rarely, so that a long
 * line costs little.
 */
export function turnRecheckMs(ahead: number, limits: FlowLimits): number {
  return ahead < limits.maxInFlight ? 30_000 : 5 * 60_000;
}

/** Gives back the place of `deliveryId`, if it holds or waits for one; returns the deliveries to wake. */
export async function releaseSendPermit(db: Database, deliveryId: string, limits: FlowLimits): Promise<string[]> {
  const [row] = await queryRows<{ wake: string[] }>(
    db,
    sql`select release_send_permit(${deliveryId}, ${limits.maxInFlight}, ${limits.reserveMs}) as wake`,
  );
  return row!.wake;
}
