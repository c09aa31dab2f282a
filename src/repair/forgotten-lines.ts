/**
 * Lines nobody will wake. A delivery waiting in line for a place is woken by whoever gives a place
 * back; a worker that dies holding places gives none back (its holds lapse, and a lapse wakes
 * nobody), and one that dies between a release and its wake signal leaves the woken delivery
 * unsignalled. The waiting deliveries also ask again by themselves, but rarely when far down a
 * long line. The repair check wakes the head of every line that waits while a place of its scope
 * is free, so that after a worker dies every line moves again within a bound.
 */
import type { Database } from '../db/client.ts';
import { releaseClosedDelivery, wakeForgottenLineHeads, type FlowLimits } from '../flow-control/places.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';

/** How long a line's head must have waited before the check wakes it: a release wakes it within moments. */
const FORGOTTEN_AFTER_MS = 10_000;

/** Heads woken per run at most. */
const HEADS_PER_RUN = 100;

/**
 * Wakes the heads of the lines nobody will wake (wakeForgottenLineHeads, under the workers'
 * `limits`), each marked woken for their `reserveMs`; a head whose workflow has closed gives its
 * place in line and the places it holds back, which wakes the next. Returns how many heads were woken.
 */
export async function wakeForgottenLines(deps: { db: Database; scheduler: DeliveryScheduler; limits: FlowLimits }): Promise<number> {
  const heads = await wakeForgottenLineHeads(deps.db, deps.limits, FORGOTTEN_AFTER_MS, HEADS_PER_RUN);
  if (heads.length === 0) return 0;
  for (const closed of await deps.scheduler.wakeForTurn(heads)) {
    const next = await releaseClosedDelivery(deps.db, closed, deps.limits);
    if (next.length > 0) await deps.scheduler.wakeForTurn(next);
  }
  return heads.length;
}
