import { setTimeout as sleep } from 'node:timers/promises';
import { CompleteAsyncError, Context, type ApplicationFailure } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import { markDeadLetter } from '../src/db/queries/deliveries.ts';
import type { SendsInFlight } from '../src/delivery/sends-in-flight.ts';
import { disableIfFailing, type AutoDisableRule } from '../src/endpoint-health/auto-disable.ts';
import type { Sender } from '../src/delivery/sender.ts';
import { acquireSendPlaces, releaseSendPlaces, turnRecheckMs, type FlowLimits } from '../src/flow-control/places.ts';
import type { Metrics } from '../src/metrics.ts';
import type { SecretBox } from '../src/secrets.ts';
import type { ActivityCompletion, HeartbeatAnswer } from '../src/temporal/activity-completion.ts';
import { SpanAttributes } from '../src/tracing/attributes.ts';
import { activeTraceContext, annotateActiveSpan, inAttemptSpan } from '../src/tracing/spans.ts';
import { SEND_HEARTBEAT_TIMEOUT_MS } from '../workflows/send-limits.ts';
import { prepareAttempt, recordAttempt, sendAttempt, type AttemptDeps, type PolicyPosition, type PreparedAttempt } from './attempt.ts';

/** Flow control of the sends (src/flow-control/). */
export interface FlowControl {
  limits: FlowLimits;
  /** Failed attempts in a row that open an endpoint's circuit breaker (CIRCUIT_BREAKER_THRESHOLD). */
  breakerThreshold: number;
  /**
   * Wakes the workflows of deliveries given their turn (the `sendTurn` signal); answers those whose
   * workflow no longer runs, whose places in line are then given back.
   */
  wake(deliveryIds: readonly string[]): Promise<string[]>;
}

/** What the activities need; the worker passes real instances. */
export interface ActivityDeps {
  db: Database;
  secretBox: SecretBox;
  sender: Sender;
  logger: Logger;
  metrics: Metrics;
  /** Send a W3C `traceparent` header naming the attempt's span (DELIVERY_TRACEPARENT; tracing on). */
  sendTraceparent: boolean;
  /** Endpoint health: when a dead letter disables its webhook. */
  autoDisable: AutoDisableRule;
  flow: FlowControl;
  /** The sends in flight in this worker's background (WORKER_MAX_SENDS_IN_FLIGHT). */
  sends: SendsInFlight;
  /** Reports the end of the send activities handed to the background. */
  completion: ActivityCompletion;
  /** Aborted when the worker has stopped: calls to Temporal still being tried again give up. */
  stopping: AbortSignal;
}

/** Pauses between the tries of a call to Temporal that did not go through (a wake signal, a report): about a minute in all. */
const TEMPORAL_RETRY_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 16_000, 32_000];

/**
 * How often a send in the background heartbeats: at 80% of the activity's heartbeat timeout, as
 * the worker throttles the heartbeats of the activities it runs (each is a write of Temporal's).
 */
const BACKGROUND_HEARTBEAT_MS = SEND_HEARTBEAT_TIMEOUT_MS * 0.8;

/** Where a round of attempts stands when its send activity is scheduled. */
export interface RoundPosition {
  /** Attempts of the round made before this activity's first (0 for a new round). */
  attemptsBefore: number;
}

/**
 * How a send activity ended without an attempt: a scope of its places was full (`turn`: wait in
 * line until woken), or it must wait for a time (`rate`: its webhook's rate limit gave it a later
 * start; `attempt`: an earlier attempt of the delivery may still be sending). `attempt` is the
 * round's attempt that did not happen, which the next activity starts with.
 */
export type SendWait = { attempt: number } & ({ wait: 'turn'; recheckMs: number } | { wait: 'rate' | 'attempt'; waitMs: number });

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

/** Creates the activities with their dependencies (the dependency-injection pattern). */
export function createActivities({ db, secretBox, sender, logger, metrics, sendTraceparent, autoDisable, flow, sends, completion, stopping }: ActivityDeps) {
  const attemptDeps: AttemptDeps = { db, secretBox, sender, logger, metrics, sendTraceparent, breakerThreshold: flow.breakerThreshold };

  /**
   * Wakes deliveries given their turn, in the background: while Temporal cannot be reached (a
   * restart, its database down) each signal not yet sent is tried again for about a minute. Past
   * that the deliveries ask again by themselves (turnRecheckMs). A delivery whose workflow no
   * longer runs gives its place in line back, which wakes the next.
   */
  const wake = (deliveryIds: readonly string[]) => {
    for (const deliveryId of deliveryIds) {
      void (async () => {
        let gone: string[] = [];
        const sent = await withRetries(async () => (gone = await flow.wake([deliveryId])), stopping);
        if (!sent) logger.warn({ deliveryId }, 'could not wake a delivery waiting for its places');
        for (const id of gone) wake(await releaseSendPlaces(db, id, '', flow.limits).catch(() => []));
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
   * places given back. Resolves with the report of the activity's end to Temporal, made by
   * {@link reportEnd} once the send no longer counts as in flight.
   */
  async function finishInBackground(
    prepared: PreparedAttempt,
    attempt: string,
    taskToken: Uint8Array,
    position: PolicyPosition,
    trace: ReturnType<typeof activeTraceContext>,
  ): Promise<() => Promise<void>> {
    const abort = new AbortController();
    let answer: HeartbeatAnswer = 'running';
    const heartbeats = setInterval(() => {
      completion.heartbeat(taskToken).then(
        (heard) => {
          if (heard === 'running' || abort.signal.aborted) return;
          answer = heard;
          abort.abort();
        },
        // Temporal unreachable: the send goes on; a retry elsewhere waits until this hold lapses.
        () => {},
      );
    }, BACKGROUND_HEARTBEAT_MS);
    let report: () => Promise<void>;
    let keepForMs: number | undefined;
    try {
      const attributes = { [SpanAttributes.deliveryId]: prepared.deliveryId, [SpanAttributes.webhookId]: prepared.webhook.id, [SpanAttributes.attemptNumber]: prepared.attemptNumber };
      const ended = await inAttemptSpan(trace, attributes, async () => recordAttempt(attemptDeps, prepared, await sendAttempt(attemptDeps, prepared, abort.signal), position));
      const final = answer as HeartbeatAnswer;
      if (final === 'cancelled') report = () => completion.reportCancelled(taskToken);
      else if (final === 'gone') report = async () => {};
      else if (ended.delivered) report = () => completion.complete(taskToken, 'delivered');
      else {
        report = () => completion.fail(taskToken, ended.failure);
        keepForMs = ended.keepPlacesForMs;
      }
    } catch (error) {
      // The attempt could not be recorded (the database is down): the policy retries it.
      logger.error({ err: error, deliveryId: prepared.deliveryId }, 'delivery attempt could not be recorded');
      report = () => completion.fail(taskToken, error as Error);
    } finally {
      clearInterval(heartbeats);
      await giveBack(prepared.deliveryId, attempt, keepForMs);
    }
    return report;
  }

  /**
   * Reports a send's end to Temporal as the worker would have, tried again while Temporal cannot
   * be reached. A report that never goes through, or that a stopped worker gives up, leaves the
   * activity to its heartbeat timeout: it is retried, and the retry finds the delivery as recorded.
   */
  async function reportEnd(report: () => Promise<void>, deliveryId: string): Promise<void> {
    if (!(await withRetries(report, stopping))) logger.warn({ deliveryId }, 'could not report the end of a send attempt to Temporal');
  }

  return {
    /**
     * One signed send of a delivery, recorded as an attempt, once it holds its places. Resolves
     * `delivered` on a 2xx (or if the delivery was already delivered), `gone` if the delivery or
     * its webhook no longer exists, and a {@link SendWait} when it must wait for its places (no
     * attempt made); fails with a retryable failure otherwise, and a non-retryable one when the
     * webhook is disabled or the event erased. The HTTP exchange runs in the worker's background
     * (the activity completes asynchronously), so a slow endpoint holds no worker slot.
     */
    async sendDelivery(deliveryId: string, round: RoundPosition = { attemptsBefore: 0 }): Promise<'delivered' | 'gone' | SendWait> {
      const context = Context.current();
      const { info } = context;
      // Heartbeats carry a cancellation (a manual retry) to the activity while it prepares, and tell the server this worker is alive.
      const heartbeats = setInterval(() => context.heartbeat(), 1_000);
      annotateActiveSpan({ [SpanAttributes.deliveryId]: deliveryId });
      const attempt = `${info.workflowExecution?.runId}/${info.activityId}/${info.attempt}`;
      const admission = await sends.admit();
      try {
        const places = await acquireSendPlaces(db, deliveryId, attempt, flow.limits, round.attemptsBefore === 0 && info.attempt === 1);
        wake(places.wake);
        const roundAttempt = round.attemptsBefore + info.attempt;
        if (places.decision === 'wait_turn') {
          annotateActiveSpan({ [SpanAttributes.outcome]: 'waiting_for_turn' });
          metrics.sendWaits.inc({ reason: `${places.blocked}_busy` });
          return { attempt: roundAttempt, wait: 'turn', recheckMs: turnRecheckMs(places, flow.limits) };
        }
        if (places.decision === 'wait_until') {
          annotateActiveSpan({ [SpanAttributes.outcome]: places.reason === 'rate' ? 'waiting_for_rate_limit' : 'waiting_for_previous_attempt' });
          metrics.sendWaits.inc({ reason: places.reason === 'rate' ? 'rate_limit' : 'previous_attempt' });
          logger.debug({ deliveryId, waitMs: places.waitMs, reason: places.reason }, 'send waits for a time');
          return { attempt: roundAttempt, wait: places.reason, waitMs: places.waitMs };
        }
        let prepared: Awaited<ReturnType<typeof prepareAttempt>>;
        try {
          prepared = await prepareAttempt(attemptDeps, deliveryId);
        } catch (error) {
          await giveBack(deliveryId, attempt);
          throw error;
        }
        if (typeof prepared === 'string') {
          await giveBack(deliveryId, attempt);
          return prepared;
        }
        const position = { attempt: info.attempt, retryPolicy: info.retryPolicy };
        const job = prepared;
        const trace = activeTraceContext();
        // The report is not part of the send in flight: a worker that stops waits for exchanges
        // to end, not for a Temporal it cannot reach.
        admission.run(async () => void reportEnd(await finishInBackground(job, attempt, info.taskToken, position, trace), job.deliveryId));
        throw new CompleteAsyncError();
      } finally {
        admission.cancel();
        clearInterval(heartbeats);
      }
    },

    /** Ends a round in `dead_letter` (idempotent). */
    async markDeadLetter(deliveryId: string, reason?: string): Promise<void> {
      annotateActiveSpan({
        [SpanAttributes.deliveryId]: deliveryId,
        [SpanAttributes.deliveryStatus]: 'dead_letter',
        [SpanAttributes.deadLetterReason]: reason ?? 'every attempt of the round failed',
      });
      await markDeadLetter(db, deliveryId, reason);
      metrics.deliveriesFinished.inc({ status: 'dead_letter' });
      logger.warn({ deliveryId, reason }, 'delivery dead-lettered');
      const disabled = await disableIfFailing(db, deliveryId, autoDisable);
      if (disabled) {
        metrics.webhooksAutoDisabled.inc();
        logger.warn(
          { webhookId: disabled.webhookId, failingSince: disabled.failingSince.toISOString(), deadLetters: disabled.deadLetters },
          `webhook disabled by the service: ${disabled.reason}`,
        );
      }
    },
  };
}

/** The activities as the workflow sees them. */
export type Activities = ReturnType<typeof createActivities>;
