import { CompleteAsyncError, Context, heartbeat } from '@temporalio/activity';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import { pendingOperationItems, queueOperationItem, runningOperationsOf, selectOperationPage } from '../src/db/queries/operations.ts';
import type { OperationStatus } from '../src/db/schema.ts';
import { endOperation, runningOperation, signalOperationRetry, type RunningOperation } from '../src/operations/lifecycle.ts';
import { heartbeatInBackground, withRetries, type ActivityCompletion, type HeartbeatAnswer } from '../src/temporal/activity-completion.ts';
import type { BackgroundWork } from '../src/temporal/background-work.ts';
import type { DeliveryScheduler } from '../src/temporal/scheduler.ts';
import { STEP_HEARTBEAT_TIMEOUT_MS } from '../workflows/bulk-retry.ts';

/** What the bulk operation activities need. */
export interface OperationActivityDeps {
  db: Database;
  scheduler: DeliveryScheduler;
  logger: Logger;
  /** Reports the end of the steps whose signals are spread in the worker's background. */
  completion: ActivityCompletion;
  /** Where those steps run, which a stopping worker waits for (their reports go out). */
  background: BackgroundWork;
  /** Aborted when the worker begins to stop: a step still spreading its signals ends with those it sent, and the next step goes on elsewhere. */
  shutdownStarted: AbortSignal;
  /** Aborted when the worker stops: a step's report being tried again is not tried once more. */
  stopping: AbortSignal;
}

/** Deliveries an operation selects at a time, when those it has selected run short. */
export const SELECTION_PAGE = 500;

/**
 * How often a step still spreading its signals heartbeats, counted from its activity's start (the
 * step heartbeats nothing before it hands off): at 80% of its heartbeat timeout, as the worker
 * throttles an activity's heartbeats. A step spreads one second's share, so it normally ends
 * before its first.
 */
const STEP_HEARTBEAT_MS = STEP_HEARTBEAT_TIMEOUT_MS * 0.8;

/** How a step of an operation ended, and how long its workflow waits before the next. */
export interface StepResult {
  /** Nothing is left to retry (or the operation, or its webhook, is gone or finished). */
  done: boolean;
  retried: number;
  skipped: number;
  /** The wait before the next step, from this one's start, that keeps the project within its rate. */
  waitMs: number;
}

type PendingItem = Awaited<ReturnType<typeof pendingOperationItems>>[number];

const NOTHING_LEFT: StepResult = { done: true, retried: 0, skipped: 0, waitMs: 0 };

/** Creates the bulk retry operation's activities (the dependency-injection pattern). */
export function createOperationActivities({ db, scheduler, logger, completion, background, shutdownStarted, stopping }: OperationActivityDeps) {
  /**
   * The signals of a step, in the worker's background: the `k`-th delivery retried is signalled
   * `k / ratePerSecond` seconds after the step's start, so a step's deliveries reach the workers
   * one at a time over its second instead of in a burst that other projects' sends would queue
   * behind. Each one queued (if still in one of the operation's statuses) just before its signal,
   * or skipped; one queued by an earlier attempt that stopped before its signal is signalled again.
   * Stops early when the worker begins to stop, or when a heartbeat (a step longer than
   * {@link STEP_HEARTBEAT_MS}) hears that the operation was cancelled. Resolves with the report of
   * the activity's end.
   */
  async function spreadSignals(
    running: RunningOperation,
    items: PendingItem[],
    ratePerSecond: number,
    { taskToken, activityStartedAt, startedAt }: { taskToken: Uint8Array; activityStartedAt: number; startedAt: number },
  ): Promise<() => Promise<void>> {
    const { operation, webhook } = running;
    let answer: HeartbeatAnswer = 'running';
    // Temporal unreachable: the step goes on; its heartbeat timeout retries it elsewhere if it lasts.
    const stopHeartbeats = heartbeatInBackground(
      completion,
      taskToken,
      { firstMs: Math.max(0, activityStartedAt + STEP_HEARTBEAT_MS - performance.now()), everyMs: STEP_HEARTBEAT_MS },
      (heard) => (answer = heard),
    );
    let retried = 0;
    let skipped = 0;
    try {
      for (const item of items) {
        const dueInMs = startedAt + (retried * 1000) / ratePerSecond - performance.now();
        if (dueInMs > 0) await sleep(dueInMs, undefined, { signal: shutdownStarted }).catch(() => {});
        if (shutdownStarted.aborted || answer !== 'running') break;
        if (item.state === 'matched' && !(await queueOperationItem(db, operation.id, item.deliveryId, operation.statuses))) {
          skipped += 1;
          continue;
        }
        await signalOperationRetry({ db, scheduler }, running, item);
        retried += 1;
      }
    } catch (error) {
      // What was signalled is marked retried: the policy's next attempt goes on from there.
      logger.warn({ err: error, operationId: operation.id }, 'bulk retry step failed');
      return () => completion.fail(taskToken, error as Error);
    } finally {
      stopHeartbeats();
    }
    if (retried + skipped > 0) logger.info({ operationId: operation.id, webhookId: webhook.id, retried, skipped }, 'bulk retry step');
    // Set by a heartbeat's answer while the signals waited (the compiler cannot see it change).
    const heard = answer as HeartbeatAnswer;
    if (heard === 'cancelled') return () => completion.reportCancelled(taskToken);
    if (heard === 'gone') return async () => {};
    const result: StepResult = { done: false, retried, skipped, waitMs: Math.ceil((retried / ratePerSecond) * 1000) };
    return () => completion.complete(taskToken, result);
  }

  /**
   * Hands a step's `items` to {@link spreadSignals} and completes the activity asynchronously:
   * the step holds no worker slot while its signals wait for their time.
   */
  function spreadInBackground(running: RunningOperation, items: PendingItem[], ratePerSecond: number, activityStartedAt: number): never {
    const timing = { taskToken: Context.current().info.taskToken, activityStartedAt, startedAt: performance.now() };
    background.run(async () => {
      const report = await spreadSignals(running, items, ratePerSecond, timing);
      // A report that never goes through leaves the step to its heartbeat timeout: it is retried, and signals nothing twice.
      if (!(await withRetries(report, stopping))) logger.warn({ operationId: running.operation.id }, 'could not report the end of a bulk retry step to Temporal');
    });
    throw new CompleteAsyncError();
  }

  return {
    /**
     * One step of a bulk retry: the operation's share of its project's rate, this second's worth
     * of deliveries (at least one, then a longer wait), signalled one after another over the
     * second in the worker's background. Selects the next page of matching deliveries first when
     * fewer than that are waiting. `done` when none is left and the selection is complete.
     */
    async retryOperationStep(input: { operationId: string; ratePerSecond: number }): Promise<StepResult> {
      const activityStartedAt = performance.now();
      const running = await runningOperation(db, input.operationId);
      if (!running) return NOTHING_LEFT;
      const share = input.ratePerSecond / Math.max(1, await runningOperationsOf(db, running.operation.projectId));
      const limit = Math.max(1, Math.floor(share));
      let items = await pendingOperationItems(db, running.operation.id, limit);
      const selecting = items.length < limit && !running.operation.selectionComplete;
      if (selecting) {
        await selectOperationPage(db, running.operation, SELECTION_PAGE);
        if (items.length === 0) items = await pendingOperationItems(db, running.operation.id, limit);
      }
      if (items.length === 0) return selecting ? { ...NOTHING_LEFT, done: false } : NOTHING_LEFT;
      return spreadInBackground(running, items, share, activityStartedAt);
    },

    /**
     * The step of operations started before steps were paced by their workflow (their histories
     * call it): handles the next `limit` deliveries, which such an operation matched when it was
     * created; its workflow waits after it.
     */
    async retryOperationPage(input: { operationId: string; limit: number; ratePerSecond: number }): Promise<StepResult> {
      const activityStartedAt = performance.now();
      const running = await runningOperation(db, input.operationId);
      if (!running) return NOTHING_LEFT;
      const items = await pendingOperationItems(db, running.operation.id, input.limit);
      if (items.length === 0) return NOTHING_LEFT;
      return spreadInBackground(running, items, input.ratePerSecond, activityStartedAt);
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
