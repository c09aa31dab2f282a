/**
 * What a worker's background work says to Temporal on its activities' behalf: the end of an
 * activity that completed asynchronously, its heartbeats, and calls tried again while Temporal
 * cannot be reached.
 */
import { setTimeout as sleep } from 'node:timers/promises';
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

/**
 * Heartbeats, from the worker's background, an activity that completed asynchronously: first
 * after `firstMs`, then every `everyMs`, until the returned function stops it. `onEnded` hears
 * once the first answer other than `running` (the workflow asked to cancel it, or the server no
 * longer knows it). A heartbeat that does not reach Temporal is let go: the work goes on, and the
 * activity's heartbeat timeout decides.
 */
export function heartbeatInBackground(
  completion: ActivityCompletion,
  taskToken: Uint8Array,
  { firstMs, everyMs }: { firstMs: number; everyMs: number },
  onEnded: (answer: Exclude<HeartbeatAnswer, 'running'>) => void,
): () => void {
  let ended = false;
  const beat = () =>
    void completion.heartbeat(taskToken).then(
      (heard) => {
        if (heard === 'running' || ended) return;
        ended = true;
        onEnded(heard);
      },
      () => {},
    );
  let every: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    beat();
    every = setInterval(beat, everyMs);
  }, firstMs);
  return () => {
    clearTimeout(first);
    clearInterval(every);
  };
}

/** Pauses between the tries of a call to Temporal that did not go through (a wake signal, a report): about a minute in all. */
const TEMPORAL_RETRY_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 16_000, 32_000];

/**
 * Tries `call` until it goes through, pausing {@link TEMPORAL_RETRY_DELAYS_MS} between tries;
 * false when it never did, or when `stopping` aborted (the worker stopped) before it did.
 */
export async function withRetries(call: () => Promise<unknown>, stopping: AbortSignal): Promise<boolean> {
  for (const delayMs of [...TEMPORAL_RETRY_DELAYS_MS, undefined]) {
    try {
      await call();
      return true;
    } catch {
      if (delayMs === undefined || stopping.aborted) return false;
      const stopped = await sleep(delayMs, false, { signal: stopping }).catch(() => true);
      if (stopped) return false;
    }
  }
  return false;
}
