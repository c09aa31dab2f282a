/**
 * The consistency check: a delivery is always on its way or where the customer can act on it.
 * A crash between a database commit and the Temporal call that follows it can break that: a
 * manual retry committed `pending` whose signal was never sent (its API process died, or a bulk
 * retry was cancelled in between), or an attempt left `processing` by a workflow that has closed.
 * This check finds such deliveries, asks Temporal where their workflows stand, and puts right
 * those whose workflow will not move them.
 */
import type { Logger } from 'pino';
import type { Database } from '../db/client.ts';
import { markDeadLetter } from '../db/queries/deliveries.ts';
import { listStuckDeliveryCandidates, type StuckDeliveryCandidate } from '../db/queries/stuck-deliveries.ts';
import type { Metrics } from '../metrics.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';

/** Deliveries looked at per run, and at most this many of one project's. */
export const STUCK_BATCH = { deliveries: 100, perProject: 10 } as const;

/** What a dead-lettered `processing` delivery tells its customer. */
export const ABANDONED_ATTEMPT_REASON = 'its attempt was left unfinished when its workflow ended; retry it to send it again';

/** What the check did, by problem. */
export type StuckRepairs = Partial<Record<'pending_without_workflow' | 'pending_retry_lost' | 'processing_without_workflow' | 'processing_after_dead_letter', number>>;

/** What the check needs. */
export interface StuckDeliveryDeps {
  db: Database;
  scheduler: DeliveryScheduler;
  logger: Logger;
  metrics: Metrics;
}

/**
 * Looks at the deliveries left as they are for more than `staleAfterMs` with nothing in the
 * database to explain it (listStuckDeliveryCandidates; one waiting for places or for its rate
 * limit is never among them) and repairs those whose workflow will not move them:
 * - `pending` (a retry was asked for) and its workflow closed, never started or still waiting
 *   for that retry: the retry is sent again, keyed by the time it was asked for, so a repeat of
 *   this check does not retry it twice;
 * - `processing` and its workflow closed, never started or waiting in its dead letter (an attempt
 *   of a worker cut off from Temporal started after its round had ended; the customer could not
 *   retry it while it shows `processing`): dead-lettered, its attempt closed.
 * A delivery whose workflow runs and is not waiting for a retry is on its way and left alone.
 */
export async function repairStuckDeliveries(deps: StuckDeliveryDeps, staleAfterMs: number): Promise<StuckRepairs> {
  const candidates = await listStuckDeliveryCandidates(deps.db, new Date(Date.now() - staleAfterMs), STUCK_BATCH.deliveries, STUCK_BATCH.perProject);
  const repairs: StuckRepairs = {};
  for (const candidate of candidates) {
    const problem = await repairOne(deps, candidate);
    if (!problem) continue;
    repairs[problem] = (repairs[problem] ?? 0) + 1;
    deps.metrics.repairs.inc({ problem });
    deps.logger.warn({ deliveryId: candidate.deliveryId, webhookId: candidate.webhookId, status: candidate.status, problem }, 'repaired a delivery its workflow would not have moved');
  }
  return repairs;
}

async function repairOne(deps: StuckDeliveryDeps, candidate: StuckDeliveryCandidate): Promise<keyof StuckRepairs | undefined> {
  const state = await deps.scheduler.deliveryWorkflowState(candidate.deliveryId);
  if (state === 'running') return undefined;
  if (candidate.status === 'processing') {
    // Delivered or deleted meanwhile: nothing to put right.
    if (!(await markDeadLetter(deps.db, candidate.deliveryId, ABANDONED_ATTEMPT_REASON))) return undefined;
    // Counted as the workflow counts its dead letters: the delivery reached a final status.
    deps.metrics.deliveriesFinished.inc({ status: 'dead_letter' });
    return state === 'waiting_for_retry' ? 'processing_after_dead_letter' : 'processing_without_workflow';
  }
  await deps.scheduler.retry(
    { deliveryId: candidate.deliveryId, webhookId: candidate.webhookId, projectId: candidate.projectId, event: candidate.event, url: candidate.url },
    `repair:${candidate.updatedAt.getTime()}`,
  );
  return state === 'waiting_for_retry' ? 'pending_retry_lost' : 'pending_without_workflow';
}
