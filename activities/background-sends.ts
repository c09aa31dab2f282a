/**
 * The background half of a send, after its activity handed the HTTP exchange off to free its
 * worker slot: the exchange and its record, the places given back and the deliveries they wake,
 * and the activity's end reported to Temporal as the worker would have.
 */
import type { Logger } from 'pino';
import { retryWhileUnavailable, type Database } from '../src/db/client.ts';
import { releaseClosedDelivery, releaseSendPlaces } from '../src/flow-control/places.ts';
import { heartbeatInBackground, withRetries, type ActivityCompletion, type HeartbeatAnswer } from '../src/temporal/activity-completion.ts';
import { SpanAttributes } from '../src/tracing/attributes.ts';
import { activeTraceContext, inAttemptSpan } from '../src/tracing/spans.ts';
import { SEND_HEARTBEAT_TIMEOUT_MS } from '../workflows/send-limits.ts';
import { recordAttempt, sendAttempt, type AttemptDeps, type PolicyPosition, type PreparedAttempt } from './attempt.ts';
import type { FlowControl } from './delivery.ts';

/**
 * How often a send in the background heartbeats: at 80% of the activity's heartbeat timeout, as
 * the worker throttles the heartbeats of the activities it runs (each is a write of Temporal's).
 */
const BACKGROUND_HEARTBEAT_MS = SEND_HEARTBEAT_TIMEOUT_MS * 0.8;

/** How often the send activity heartbeats while it prepares, in its slot (its first heartbeat is this long after its start). */
export const PREPARING_HEARTBEAT_MS = 1_000;

/**
 * When a send's background heartbeats first, `sinceStartMs` after its activity started. The
 * worker sends an activity's heartbeats at most every 80% of its timeout and drops the one it
 * holds back when the activity hands its send off, so the server may have heard nothing since the
 * first one: a hand-off after that heartbeats at once. One before it, the common case, heartbeats
 * first as the activity would have, 80% of the timeout after its start.
 */
export function firstBackgroundHeartbeatMs(sinceStartMs: number): number {
  return sinceStartMs < PREPARING_HEARTBEAT_MS ? BACKGROUND_HEARTBEAT_MS - sinceStartMs : 0;
}

/** What the background half of the sends needs. */
export interface BackgroundSendDeps {
  db: Database;
  logger: Logger;
  flow: FlowControl;
  attemptDeps: AttemptDeps;
  /** Reports the end of the send activities handed to the background. */
  completion: ActivityCompletion;
  /** Aborted when the worker stops: calls to Temporal being tried again are not tried once more. */
  stopping: AbortSignal;
}

/** Creates the background half of the sends: `wake`, `giveBack`, `finishInBackground` and `reportEnd`. */
export function createBackgroundSends({ db, logger, flow, attemptDeps, completion, stopping }: BackgroundSendDeps) {
  /**
   * Wakes deliveries given their turn, in the background: while Temporal cannot be reached (a
   * restart, its database down) each signal not yet sent is tried again for about a minute. Past
   * that the deliveries ask again by themselves (turnRecheckMs). A delivery whose workflow no
   * longer runs gives its place in line and its places back, which wakes the next.
   */
  const wake = (deliveryIds: readonly string[]) => {
    for (const deliveryId of deliveryIds) {
      void (async () => {
        let gone: string[] = [];
        const sent = await withRetries(async () => (gone = await flow.wake([deliveryId])), stopping);
        if (!sent) logger.warn({ deliveryId }, 'could not wake a delivery waiting for its places');
        for (const id of gone) wake(await releaseClosedDelivery(db, id, flow.limits).catch(() => []));
      })();
    }
  };

  /**
   * Gives back the places of `attempt`, and wakes who gets them; with `keepForMs` (the attempt
   * timed out, and the delivery tries again after that backoff) keeps them for its next attempt.
   */
  const giveBack = (deliveryId: string, attempt: string, keepForMs?: number) =>
    // Places that cannot be given back now lapse after their hold (FlowLimits.holdMs).
    releaseSendPlaces(db, deliveryId, attempt, flow.limits, keepForMs).then(wake, (error: unknown) =>
      logger.warn({ err: error, deliveryId }, 'could not give back the send places; they lapse after their hold'),
    );

  /**
   * The part of an attempt that waits on the network, run in the worker's background after the
   * activity handed it off: the exchange (cancelled when a heartbeat says so), its record and the
   * places given back. Resolves with the report of the activity's end to Temporal, for
   * {@link reportEnd}.
   */
  async function finishInBackground(
    prepared: PreparedAttempt,
    attempt: string,
    taskToken: Uint8Array,
    position: PolicyPosition,
    trace: ReturnType<typeof activeTraceContext>,
    recordBy: number,
    activityStartedAt: number,
  ): Promise<() => Promise<void>> {
    const abort = new AbortController();
    let answer: HeartbeatAnswer = 'running';
    // Temporal unreachable: the send goes on; a retry elsewhere waits until this hold lapses.
    const stopHeartbeats = heartbeatInBackground(
      completion,
      taskToken,
      { firstMs: firstBackgroundHeartbeatMs(performance.now() - activityStartedAt), everyMs: BACKGROUND_HEARTBEAT_MS },
      (heard) => {
        answer = heard;
        abort.abort();
      },
    );
    let report: () => Promise<void>;
    let keepForMs: number | undefined;
    try {
      const attributes = { [SpanAttributes.deliveryId]: prepared.deliveryId, [SpanAttributes.webhookId]: prepared.webhook.id, [SpanAttributes.attemptNumber]: prepared.attemptNumber };
      const ended = await inAttemptSpan(trace, attributes, async () => {
        const sent = await sendAttempt(attemptDeps, prepared, abort.signal);
        // The request went out: its outcome is recorded once the database answers, while the
        // activity may still end in time, rather than the attempt failed and its request sent again.
        return retryWhileUnavailable(() => recordAttempt(attemptDeps, prepared, sent, position), { until: recordBy, signal: stopping });
      });
      const final = answer as HeartbeatAnswer;
      if (final === 'cancelled') report = () => completion.reportCancelled(taskToken);
      else if (final === 'gone') report = async () => {};
      else if (ended.delivered) report = () => completion.complete(taskToken, 'delivered');
      else {
        report = () => completion.fail(taskToken, ended.failure);
        keepForMs = ended.keepPlacesForMs;
      }
    } catch (error) {
      // The attempt could not be recorded (the database down past recordBy): the policy retries it.
      logger.error({ err: error, deliveryId: prepared.deliveryId }, 'delivery attempt could not be recorded');
      report = () => completion.fail(taskToken, error as Error);
    } finally {
      stopHeartbeats();
      await giveBack(prepared.deliveryId, attempt, keepForMs);
    }
    return report;
  }

  /**
   * Reports a send's end to Temporal as the worker would have, tried again while Temporal cannot
   * be reached, but not once the worker is stopping (a call under way still ends). A report that
   * never goes through leaves the activity to its heartbeat timeout: it is retried, and the retry
   * finds the delivery as recorded.
   */
  async function reportEnd(report: () => Promise<void>, deliveryId: string): Promise<void> {
    if (!(await withRetries(report, stopping))) logger.warn({ deliveryId }, 'could not report the end of a send attempt to Temporal');
  }
  return { wake, giveBack, finishInBackground, reportEnd };
}
