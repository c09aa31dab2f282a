import {
  ActivityCancellationType,
  CancellationScope,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { OperationActivities } from '../activities/operations.ts';
import { ProjectIdAttribute } from './search-attributes.ts';

/** Input of {@link bulkRetryWorkflow}. */
export interface BulkRetryInput {
  operationId: string;
  /** Deliveries its project's operations signal per second at most, together (BULK_RETRY_RATE). */
  ratePerSecond: number;
  /** Steps per run before continuing as new ({@link PAGES_PER_RUN} unless set). */
  pagesPerRun?: number;
}

/** Steps per run before the workflow continues as new (keeps its history short). */
export const PAGES_PER_RUN = 200;

/**
 * The patch that moved the operation's pacing out of its activities and its selection into its
 * workflow: runs started before it (their histories have no marker) go on as they were.
 */
const PACED_IN_WORKFLOW = 'bulk-retry-paced-in-workflow';

/**
 * A step's heartbeat timeout: a worker that dies while its step spreads its signals is noticed
 * after this long, and the step is retried elsewhere (it signals nothing twice).
 */
export const STEP_HEARTBEAT_TIMEOUT_MS = 10_000;

const RETRY_OPTIONS = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' } as const;

/** The operation's activities, dispatched under its project's fairness key. */
function activitiesOf(projectId: string | undefined) {
  const priority = projectId ? { priority: { fairnessKey: projectId } } : {};
  const steps = proxyActivities<OperationActivities>({
    startToCloseTimeout: '2m',
    heartbeatTimeout: STEP_HEARTBEAT_TIMEOUT_MS,
    retry: RETRY_OPTIONS,
    // On cancel, the step in flight ends before the operation is marked cancelled.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    ...priority,
  });
  return {
    retryOperationStep: steps.retryOperationStep,
    retryOperationPage: steps.retryOperationPage,
    finishOperation: proxyActivities<OperationActivities>({ startToCloseTimeout: '2m', retry: RETRY_OPTIONS, ...priority }).finishOperation,
  };
}

/**
 * A bulk retry operation. Each step is one activity: it selects the next page of the deliveries
 * the operation matches when it needs more, queues the step's share of them (still failed or
 * dead-lettered) and signals their workflows one at a time over the step's second (keyed by the
 * operation id, so a step repeated after a crash retries nothing twice), and skips those that
 * moved on. The signals wait for their time in the worker's background (the activity completes
 * asynchronously), and between steps the workflow waits: nothing holds a worker slot while it
 * waits, and the project's operations together signal at most BULK_RETRY_RATE a second. Its
 * progress lives in the database (`operations`, `operation_deliveries`), so it survives worker
 * and server restarts; cancelling it stops it after the step in hand, and its end signals any
 * delivery it had queued.
 */
export async function bulkRetryWorkflow(input: BulkRetryInput): Promise<void> {
  const { retryOperationStep, retryOperationPage, finishOperation } = activitiesOf(workflowInfo().typedSearchAttributes.get(ProjectIdAttribute));
  const paced = patched(PACED_IN_WORKFLOW);
  try {
    const pagesPerRun = input.pagesPerRun ?? PAGES_PER_RUN;
    for (let pages = 0; pages < pagesPerRun && !workflowInfo().continueAsNewSuggested; pages += 1) {
      const started = Date.now();
      const step = paced
        ? await retryOperationStep({ operationId: input.operationId, ratePerSecond: input.ratePerSecond })
        : await retryOperationPage({ operationId: input.operationId, limit: Math.max(1, Math.min(100, Math.floor(input.ratePerSecond))), ratePerSecond: input.ratePerSecond });
      if (step.done) {
        await finishOperation(input.operationId, 'completed');
        return;
      }
      const rest = (paced ? step.waitMs : (step.retried / input.ratePerSecond) * 1000) - (Date.now() - started);
      if (rest > 0) await sleep(rest);
    }
  } catch (error) {
    await CancellationScope.nonCancellable(() => finishOperation(input.operationId, isCancellation(error) ? 'cancelled' : 'failed'));
    throw error;
  }
  await continueAsNew<typeof bulkRetryWorkflow>(input);
}
