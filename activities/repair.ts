import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import type { FlowLimits } from '../src/flow-control/places.ts';
import type { Metrics } from '../src/metrics.ts';
import { wakeForgottenLines } from '../src/repair/forgotten-lines.ts';
import { dispatchUndispatchedEvents } from '../src/repair/outbox.ts';
import { repairOrphanedOperations } from '../src/repair/orphaned-operations.ts';
import { repairStuckDeliveries } from '../src/repair/stuck-deliveries.ts';
import type { DeliveryScheduler } from '../src/temporal/scheduler.ts';

/** What the repair check's activities need. */
export interface RepairActivityDeps {
  db: Database;
  scheduler: DeliveryScheduler;
  logger: Logger;
  metrics: Metrics;
  /** The send capacity's limits, as the worker's send activities apply them. */
  limits: FlowLimits;
}

/** Creates the repair check's activities (the dependency-injection pattern). */
export function createRepairActivities(deps: RepairActivityDeps) {
  return {
    /** Starts the workflows of one batch of undispatched events; `more` when the batch was full or took a project's share. */
    async dispatchUndispatchedEvents(olderThanMs: number): Promise<{ dispatched: number; more: boolean }> {
      const batch = await dispatchUndispatchedEvents(deps, olderThanMs);
      if (batch.dispatched > 0) {
        deps.metrics.repairs.inc({ problem: 'undispatched_event' }, batch.dispatched);
        deps.logger.warn({ count: batch.dispatched }, 'started deliveries of undispatched events');
      }
      return batch;
    },

    /** Wakes the heads of the lines nobody will wake (their waker died); returns how many. */
    async wakeForgottenLines(): Promise<number> {
      const woken = await wakeForgottenLines(deps);
      if (woken > 0) {
        deps.metrics.repairs.inc({ problem: 'forgotten_line' }, woken);
        deps.logger.warn({ count: woken }, 'woke the heads of waiting lines nobody would have woken');
      }
      return woken;
    },

    /**
     * Puts right the bulk retry operations no workflow runs (the deliveries they queued wait on
     * them), then the deliveries left as they are for `staleAfterMs` whose workflow would not move them.
     */
    async repairStuckDeliveries(staleAfterMs: number): Promise<Record<string, number>> {
      const operations = await repairOrphanedOperations(deps, staleAfterMs);
      return { ...operations, ...(await repairStuckDeliveries(deps, staleAfterMs)) };
    },
  };
}

/** The repair check's activities as the workflow sees them. */
export type RepairActivities = ReturnType<typeof createRepairActivities>;
