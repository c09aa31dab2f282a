import { Context, heartbeat } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import { pendingOperationItems, queueOperationItem, runningOperationsOf, selectOperationPage } from '../src/db/queries/operations.ts';
import type { OperationStatus } from '../src/db/schema.ts';
import { endOperation, runningOperation, signalOperationRetry, type RunningOperation } from '../src/operations/lifecycle.ts';
import type { DeliveryScheduler } from '../src/temporal/scheduler.ts';

/** What the bulk operation activities need. */
export interface OperationActivityDeps {
  db: Database;
  scheduler: DeliveryScheduler;
  logger: Logger;
}

/** Deliveries an operation selects at a time, when those it has selected run short. */
export const SELECTION_PAGE = 500;

/** How a step of an operation ended, and how long its workflow waits before the next. */
export interface StepResult {
  /** Nothing is left to retry (or the operation, or its webhook, is gone or finished). */
  done: boolean;
  retried: number;
  skipped: number;
  /** The wait before the next step, from this one's start, that keeps the project within its rate. */
  waitMs: number;
}

/** Creates the bulk retry operation's activities (the dependency-injection pattern). */
export function createOperationActivities({ db, scheduler, logger }: OperationActivityDeps) {
  /**
   * Handles up to `limit` of the operation's deliveries, back to back (no waiting: the workflow
   * paces the steps): signals again those queued by an earlier attempt that stopped before their
   * signal, queues and signals each matched one still in one of its statuses, skips the others.
   * Stops between two deliveries when the operation is cancelled.
   */
  async function handleItems(running: RunningOperation, limit: number) {
    const { operation, webhook } = running;
    const items = await pendingOperationItems(db, operation.id, limit);
    let retried = 0;
    let skipped = 0;
    for (const item of items) {
      if (Context.current().cancellationSignal.aborted) break;
      if (item.state === 'matched' && !(await queueOperationItem(db, operation.id, item.deliveryId, operation.statuses))) {
        skipped += 1;
        continue;
      }
      await signalOperationRetry({ db, scheduler }, running, item);
      retried += 1;
      heartbeat();
    }
    if (retried + skipped > 0) logger.info({ operationId: operation.id, webhookId: webhook.id, retried, skipped }, 'bulk retry step');
    return { items: items.length, retried, skipped };
  }

  return {
    /**
     * One step of a bulk retry: the operation's share of its project's rate, this second's worth
     * of deliveries (at least one, then a longer wait). Selects the next page of matching
     * deliveries first when fewer than that are waiting. `done` when none is left and the
     * selection is complete.
     */
    async retryOperationStep(input: { operationId: string; ratePerSecond: number }): Promise<StepResult> {
      const running = await runningOperation(db, input.operationId);
      if (!running) return { done: true, retried: 0, skipped: 0, waitMs: 0 };
      const share = input.ratePerSecond / Math.max(1, await runningOperationsOf(db, running.operation.projectId));
      const limit = Math.max(1, Math.floor(share));
      let handled = await handleItems(running, limit);
      if (handled.items < limit && !running.operation.selectionComplete) {
        await selectOperationPage(db, running.operation, SELECTION_PAGE);
        if (handled.items === 0) handled = await handleItems(running, limit);
        return { done: false, retried: handled.retried, skipped: handled.skipped, waitMs: Math.ceil((handled.retried / share) * 1000) };
      }
      return { done: handled.items === 0, retried: handled.retried, skipped: handled.skipped, waitMs: Math.ceil((handled.retried / share) * 1000) };
    },

    /**
     * The step of operations started before steps were paced by their workflow (their histories
     * call it): handles the next `limit` deliveries, which such an operation matched when it was
     * created; its workflow waits after it.
     */
    async retryOperationPage(input: { operationId: string; limit: number; ratePerSecond: number }): Promise<StepResult> {
      const running = await runningOperation(db, input.operationId);
      if (!running) return { done: true, retried: 0, skipped: 0, waitMs: 0 };
      const handled = await handleItems(running, input.limit);
      return { done: handled.items === 0, retried: handled.retried, skipped: handled.skipped, waitMs: Math.ceil((handled.retried / input.ratePerSecond) * 1000) };
    },

    /** Ends the operation, after signalling the deliveries it had queued ({@link endOperation}). */
    async finishOperation(operationId: string, status: Exclude<OperationStatus, 'running'>) {
      await endOperation({ db, scheduler }, operationId, status, () => heartbeat());
      logger.info({ operationId, status }, 'bulk retry operation finished');
    },
  };
}

/** The operation activities as the workflow sees them. */
export type OperationActivities = ReturnType<typeof createOperationActivities>;
