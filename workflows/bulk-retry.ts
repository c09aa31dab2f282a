import { ActivityCancellationType, CancellationScope, continueAsNew, isCancellation, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { OperationActivities } from '../activities/operations.ts';

/** Input of {@link bulkRetryWorkflow}. */
export interface BulkRetryInput {
  operationId: string;
  /** Deliveries signalled per second at most. */
  ratePerSecond: number;
  /** Pages per run before continuing as new ({@link PAGES_PER_RUN} unless set). */
  pagesPerRun?: number;
}

const { retryOperationPage } = proxyActivities<OperationActivities>({
  startToCloseTimeout: '2m',
  heartbeatTimeout: '10s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
  // On cancel, the page in flight (at most a second's worth) ends before the operation is marked cancelled.
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

const { finishOperation } = proxyActivities<OperationActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** Pages per run before the workflow continues as new (keeps its history short). */
export const PAGES_PER_RUN = 200;

/**
 * A bulk retry operation: pages through the deliveries it matched at creation, a second's worth
 * at a time, queues each that is still failed or dead-lettered and signals its workflow (keyed by
 * the operation id, so a page repeated after a crash retries nothing twice), and skips those
 * that moved on by themselves. Its progress lives in the database (`operation_deliveries`), so it
 * survives worker and server restarts; cancelling it stops it after the delivery in hand.
 */
export async function bulkRetryWorkflow(input: BulkRetryInput): Promise<void> {
  const pageSize = Math.max(1, Math.min(100, Math.floor(input.ratePerSecond)));
  try {
    const pagesPerRun = input.pagesPerRun ?? PAGES_PER_RUN;
    for (let pages = 0; pages < pagesPerRun && !workflowInfo().continueAsNewSuggested; pages += 1) {
      const started = Date.now();
      const page = await retryOperationPage({ operationId: input.operationId, limit: pageSize, ratePerSecond: input.ratePerSecond });
      if (page.done) {
        await finishOperation(input.operationId, 'completed');
        return;
      }
      const rest = (page.retried / input.ratePerSecond) * 1000 - (Date.now() - started);
      if (rest > 0) await sleep(rest);
    }
  } catch (error) {
    await CancellationScope.nonCancellable(() => finishOperation(input.operationId, isCancellation(error) ? 'cancelled' : 'failed'));
    throw error;
  }
  await continueAsNew<typeof bulkRetryWorkflow>(input);
}
