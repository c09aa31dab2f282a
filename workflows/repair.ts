import { proxyLocalActivities } from '@temporalio/workflow';
import type { RepairActivities } from '../activities/repair.ts';

/** Input of {@link repairWorkflow}. */
export interface RepairInput {
  /** An event not dispatched this long after it was accepted is dispatched by the check. */
  undispatchedAfterMs: number;
  /** A delivery `pending` or `processing` this long with nothing to explain it is looked at (REPAIR_AFTER). */
  staleAfterMs: number;
}

/** What a run did, shown as the workflow's result in the Web UI. */
export interface RepairResult {
  eventsDispatched: number;
  /** Heads of waiting lines woken because nobody else would have (their waker died). */
  linesWoken: number;
  deliveriesRepaired: Record<string, number>;
}

/** Batches of undispatched events one run starts at most; the next run goes on. */
const MAX_OUTBOX_BATCHES = 10;

// Local activities: a run that finds nothing costs one workflow task beside its start.
const { dispatchUndispatchedEvents, repairStuckDeliveries, wakeForgottenLines } = proxyLocalActivities<RepairActivities>({
  startToCloseTimeout: '1m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 3 },
});

/**
 * One run of the repair check (started by its Temporal Schedule every REPAIR_INTERVAL): starts
 * the workflows of events their API process did not get to, fairly across projects, wakes the
 * waiting lines nobody would wake, then puts right the deliveries whose workflow would not move
 * them (src/repair/).
 */
export async function repairWorkflow(input: RepairInput): Promise<RepairResult> {
  let eventsDispatched = 0;
  for (let batch = 0; batch < MAX_OUTBOX_BATCHES; batch += 1) {
    const { dispatched, more } = await dispatchUndispatchedEvents(input.undispatchedAfterMs);
    eventsDispatched += dispatched;
    if (!more) break;
  }
  const linesWoken = await wakeForgottenLines();
  const deliveriesRepaired = await repairStuckDeliveries(input.staleAfterMs);
  return { eventsDispatched, linesWoken, deliveriesRepaired };
}
