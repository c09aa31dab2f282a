import { CompleteAsyncError, Context } from '@temporalio/activity';
import { databaseUnavailableReason, retryWhileUnavailable, type UnavailableTries } from '../src/db/client.ts';
import { markDeadLetter } from '../src/db/queries/deliveries.ts';
import type { Admission, SendsInFlight } from '../src/delivery/sends-in-flight.ts';
import { disableIfFailing, type AutoDisableRule } from '../src/endpoint-health/auto-disable.ts';
import { acquireSendPlaces, releaseSendPlaces, turnRecheckMs, type FlowLimits, type TimedWaitReason } from '../src/flow-control/places.ts';
import type { ActivityCompletion } from '../src/temporal/activity-completion.ts';
import { SpanAttributes } from '../src/tracing/attributes.ts';
import { activeTraceContext, annotateActiveSpan } from '../src/tracing/spans.ts';
import { prepareAttempt, type AttemptDeps } from './attempt.ts';
import { createBackgroundSends, PREPARING_HEARTBEAT_MS } from './background-sends.ts';

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

/** What the activities need (the attempt's steps' needs, the breaker's threshold taken from `flow`); the worker passes real instances. */
export interface DeliveryActivityDeps extends Omit<AttemptDeps, 'breakerThreshold'> {
  /** Endpoint health: when a dead letter disables its webhook. */
  autoDisable: AutoDisableRule;
  flow: FlowControl;
  /** The sends in flight in this worker's background (WORKER_MAX_SENDS_IN_FLIGHT). */
  sends: SendsInFlight;
  /** Reports the end of the send activities handed to the background. */
  completion: ActivityCompletion;
  /** Aborted when the worker stops: calls to Temporal being tried again are not tried once more. */
  stopping: AbortSignal;
  /** Aborted when the worker begins to stop: a send still waiting for room in it sends nothing, and its round waits for another worker. */
  shutdownStarted: AbortSignal;
}

/** Where a round of attempts stands when its send activity is scheduled. */
export interface RoundPosition {
  /** Attempts of the round made before this activity's first (0 for a new round). */
  attemptsBefore: number;
}

/**
 * How a send activity ended without an attempt: a scope of its places was full (`turn`: wait in
 * line until woken), or it must wait for a time (`rate`: its webhook's rate limit, its project's
 * recovery schedule or its open breaker's next probe gave it a later start; `attempt`: an
 * earlier attempt of the delivery may still be sending; `database`: its database could not be
 * reached before its request went out; `worker`: its worker began to stop while it waited for
 * room there). `attempt` is the round's attempt that did not happen, which the next activity
 * starts with.
 */
export type SendWait = { attempt: number } & ({ wait: 'turn'; recheckMs: number } | { wait: 'rate' | 'attempt' | 'database' | 'worker'; waitMs: number });

/**
 * What each timed wait of a send's places is called in its span and its metric, and how its
 * workflow waits: a wait for a start on the project's recovery schedule or for an open breaker's
 * next probe is a rate wait to the workflow (a new start given earlier wakes it).
 */
const TIMED_WAITS: Record<TimedWaitReason, { outcome: string; metric: string; wait: 'rate' | 'attempt' }> = {
  rate: { outcome: 'waiting_for_rate_limit', metric: 'rate_limit', wait: 'rate' },
  recovery: { outcome: 'waiting_for_recovery_pace', metric: 'recovery_pace', wait: 'rate' },
  probe: { outcome: 'waiting_for_breaker_probe', metric: 'breaker_probe', wait: 'rate' },
  attempt: { outcome: 'waiting_for_previous_attempt', metric: 'previous_attempt', wait: 'attempt' },
};

/** How long a round whose send was waiting for room in a stopping worker waits before its next activity, which another worker takes. */
const WORKER_STOPPING_WAIT_MS = 1_000;

/**
 * How long a send that could not reach its database waits before its round asks again, on
 * average (each wait is drawn between half and one and a half of it, so that the sends an outage
 * caught do not all come back at one instant).
 */
const DATABASE_RECHECK_MS = 5_000;

/**
 * How long a send tries again the statements that take its places and open its attempt while the
 * database cannot be reached, before its round waits for it instead: long enough for a connection
 * lost under a statement (or a short failover), short enough that a longer outage holds no
 * activity. Both are safe to try again: asked again by the same attempt, they answer what the
 * first try, its answer lost, committed. A lock not granted in time committed nothing, and is not
 * tried again here: each try would hold a connection through another lock wait.
 */
const DATABASE_TRIES_MS = 10_000;

/** Time left, at the latest, between a send's last try to record its outcome and its activity's start-to-close timeout. */
const RECORD_MARGIN_MS = 10_000;

/** Creates the activities with their dependencies (the dependency-injection pattern). */
export function createDeliveryActivities({ db, secretBox, sender, logger, metrics, sendTraceparent, autoDisable, flow, sends, completion, stopping, shutdownStarted }: DeliveryActivityDeps) {
  const attemptDeps: AttemptDeps = { db, secretBox, sender, logger, metrics, sendTraceparent, breakerThreshold: flow.breakerThreshold };

  const { wake, giveBack, finishInBackground, reportEnd } = createBackgroundSends({ db, logger, flow, attemptDeps, completion, stopping });

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
      // On the monotonic clock: only durations are measured from it.
      const startedAt = performance.now();
      const context = Context.current();
      const { info } = context;
      // An outcome not recorded by then is left to the retry policy, before the server times the activity out.
      const recordBy = startedAt + info.startToCloseTimeoutMs - RECORD_MARGIN_MS;
      // Heartbeats carry a cancellation (a manual retry) to the activity while it prepares, and tell the server this worker is alive.
      const heartbeats = setInterval(() => context.heartbeat(), PREPARING_HEARTBEAT_MS);
      annotateActiveSpan({ [SpanAttributes.deliveryId]: deliveryId });
      const attempt = `${info.workflowExecution?.runId}/${info.activityId}/${info.attempt}`;
      const roundAttempt = round.attemptsBefore + info.attempt;
      let admission: Admission | undefined;
      try {
        admission = await sends.admit([context.cancellationSignal, shutdownStarted]);
        if (!admission) {
          // Cancelled (a manual retry) while it waited: it ends as cancelled, nothing sent.
          context.cancellationSignal.throwIfAborted();
          annotateActiveSpan({ [SpanAttributes.outcome]: 'waiting_for_another_worker' });
          metrics.sendWaits.inc({ reason: 'worker_stopping' });
          return { attempt: roundAttempt, wait: 'worker', waitMs: WORKER_STOPPING_WAIT_MS };
        }
        const databaseTries: UnavailableTries = { until: Math.min(recordBy, performance.now() + DATABASE_TRIES_MS), signal: context.cancellationSignal, reasons: ['database_unreachable'] };
        const newRound = round.attemptsBefore === 0 && info.attempt === 1;
        const places = await retryWhileUnavailable(() => acquireSendPlaces(db, deliveryId, attempt, flow.limits, newRound), databaseTries);
        wake(places.wake);
        if (places.decision === 'wait_turn') {
          annotateActiveSpan({ [SpanAttributes.outcome]: 'waiting_for_turn' });
          metrics.sendWaits.inc({ reason: `${places.blocked}_busy` });
          return { attempt: roundAttempt, wait: 'turn', recheckMs: turnRecheckMs(places, flow.limits) };
        }
        if (places.decision === 'wait_until') {
          const why = TIMED_WAITS[places.reason];
          annotateActiveSpan({ [SpanAttributes.outcome]: why.outcome });
          metrics.sendWaits.inc({ reason: why.metric });
          logger.debug({ deliveryId, waitMs: places.waitMs, reason: places.reason }, 'send waits for a time');
          return { attempt: roundAttempt, wait: why.wait, waitMs: places.waitMs };
        }
        let prepared: Awaited<ReturnType<typeof prepareAttempt>>;
        try {
          prepared = await prepareAttempt(attemptDeps, deliveryId, databaseTries);
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
        admission.run(async () => reportEnd(await finishInBackground(job, attempt, info.taskToken, position, trace, recordBy, startedAt), job.deliveryId));
        throw new CompleteAsyncError();
      } catch (error) {
        const reason = databaseUnavailableReason(error);
        if (!reason) throw error;
        // No request went out: the round waits for its database instead of using up an attempt,
        // so an outage (or a migration's lock) longer than a round's schedule does not end it in
        // dead_letter. (Places granted by a try whose answer was lost, the database away past the
        // tries, lapse after their hold; those of a failed preparation went back.)
        const waitMs = Math.round(DATABASE_RECHECK_MS * (0.5 + Math.random()));
        annotateActiveSpan({ [SpanAttributes.outcome]: 'waiting_for_database' });
        metrics.sendWaits.inc({ reason });
        logger.warn({ deliveryId, waitMs, reason, err: error }, 'send waits for its database, which is not available');
        return { attempt: roundAttempt, wait: 'database', waitMs };
      } finally {
        admission?.cancel();
        clearInterval(heartbeats);
      }
    },

    /**
     * Ends a round in `dead_letter` (idempotent), and gives back what the delivery still held for
     * a next attempt: its place in line (a round whose last activity failed while it waited) and
     * places kept for it. Until its retry it waits for nothing, and a place in line it kept would
     * stand at the head of its webhook's line, woken in vain, ahead of every later delivery.
     */
    async markDeadLetter(deliveryId: string, reason?: string): Promise<void> {
      annotateActiveSpan({
        [SpanAttributes.deliveryId]: deliveryId,
        [SpanAttributes.deliveryStatus]: 'dead_letter',
        [SpanAttributes.deadLetterReason]: reason ?? 'every attempt of the round failed',
      });
      await markDeadLetter(db, deliveryId, reason);
      wake(await releaseSendPlaces(db, deliveryId, null, flow.limits));
      const disabled = await disableIfFailing(db, deliveryId, autoDisable);
      // Counted once every write is done: a call that fails before is run again, and counts then.
      metrics.deliveriesFinished.inc({ status: 'dead_letter' });
      logger.warn({ deliveryId, reason }, 'delivery dead-lettered');
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
export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
