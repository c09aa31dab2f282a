import { ActivityCancelledError, ActivityNotFoundError, type Client } from '@temporalio/client';

/** What the server said to a heartbeat of an activity that completes asynchronously. */
export type HeartbeatAnswer =
  /** Still the activity's running attempt. */
  | 'running'
  /** The workflow asked to cancel it (a manual retry): end it and report the cancellation. */
  | 'cancelled'
  /** The server no longer knows this attempt (it timed out and was retried, or its workflow closed). */
  | 'gone';

/**
 * Reports the end of activity attempts that completed asynchronously (`CompleteAsyncError`): the
 * send activity hands its HTTP exchange to the worker's background, freeing its slot, and the
 * background reports here by task token. Each report is the call the worker would have made.
 */
export interface ActivityCompletion {
  complete(taskToken: Uint8Array, result: unknown): Promise<void>;
  fail(taskToken: Uint8Array, error: Error): Promise<void>;
  reportCancelled(taskToken: Uint8Array): Promise<void>;
  /** Records a heartbeat; throws when the server cannot be reached. */
  heartbeat(taskToken: Uint8Array): Promise<HeartbeatAnswer>;
}

/** An {@link ActivityCompletion} on a Temporal client (its `activity` API). */
export function activityCompletion(client: Client): ActivityCompletion {
  const { activity } = client;
  return {
    complete: (taskToken, result) => activity.complete(taskToken, result),
    fail: (taskToken, error) => activity.fail(taskToken, error),
    reportCancelled: (taskToken) => activity.reportCancellation(taskToken),
    async heartbeat(taskToken) {
      try {
        await activity.heartbeat(taskToken);
        return 'running';
      } catch (error) {
        if (error instanceof ActivityCancelledError) return 'cancelled';
        if (error instanceof ActivityNotFoundError) return 'gone';
        throw error;
      }
    },
  };
}
