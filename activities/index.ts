import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import { finishAttempt, markDeadLetter, startAttempt, type AttemptResult } from '../src/db/queries/deliveries.ts';
import { buildNotificationBody, buildNotificationHeaders } from '../src/delivery/notification.ts';
import { openPayload } from '../src/events/payload.ts';
import { disableIfFailing, type AutoDisableRule } from '../src/endpoint-health/auto-disable.ts';
import type { Sender } from '../src/delivery/sender.ts';
import { acquireSendPermit, releaseSendPermit, turnRecheckMs, type FlowLimits } from '../src/flow-control/permits.ts';
import { attemptOutcomeLabel, type Metrics } from '../src/metrics.ts';
import type { SecretBox } from '../src/secrets.ts';
import { SpanAttributes } from '../src/tracing/attributes.ts';
import { annotateActiveSpan, tracedExchange } from '../src/tracing/spans.ts';
import { openWebhookHeaders, openWebhookSecret } from '../src/webhook-secrets.ts';
import { NON_RETRYABLE, NON_RETRYABLE_REASONS } from '../workflows/failure-types.ts';

/** Flow control of the sends to one endpoint (src/flow-control/). */
export interface FlowControl {
  limits: FlowLimits;
  /** Failed attempts in a row that open an endpoint's circuit breaker (CIRCUIT_BREAKER_THRESHOLD). */
  breakerThreshold: number;
  /** Wakes the workflows of deliveries given a place at their endpoint (the `sendTurn` signal). */
  wake(deliveryIds: readonly string[]): Promise<void>;
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
}

/** Pauses between the tries of a wake signal that Temporal did not take: about a minute in all. */
const WAKE_RETRY_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 16_000, 32_000];

/** Where a round of attempts stands when its send activity is scheduled. */
export interface RoundPosition {
  /** Attempts of the round made before this activity's first (0 for a new round). */
  attemptsBefore: number;
}

/**
 * How a send activity ended without an attempt: its endpoint had no place free (`turn`: wait in
 * line until woken) or its rate limit gave a later start (`rate`: wait `waitMs`). `attempt` is
 * the round's attempt that did not happen, which the next activity starts with.
 */
export type SendWait = { attempt: number } & ({ wait: 'turn'; recheckMs: number } | { wait: 'rate'; waitMs: number });

/** The delay before the next automatic attempt: the policy's, or longer if the endpoint asked (Retry-After), within the policy's cap. */
function nextRetryDelay(attempt: number, retryAfterMs: number | undefined): number {
  const { retryPolicy } = Context.current().info;
  const initial = Number(retryPolicy?.initialInterval ?? 1000);
  const coefficient = retryPolicy?.backoffCoefficient ?? 2;
  const maximum = Number(retryPolicy?.maximumInterval ?? initial * 100);
  return Math.min(Math.max(initial * coefficient ** (attempt - 1), retryAfterMs ?? 0), maximum);
}

/** The status an attempt leaves its delivery in when it fails: `failed` until the next attempt, or `dead_letter` after the last. */
function nextAttemptStatus(finishedAt: Date, delayMs: number): AttemptResult['nextStatus'] {
  const { attempt, retryPolicy } = Context.current().info;
  const maximumAttempts = retryPolicy?.maximumAttempts ?? 0;
  if (maximumAttempts > 0 && attempt >= maximumAttempts) return { status: 'dead_letter' };
  return { status: 'failed', nextRetryAt: new Date(finishedAt.getTime() + delayMs) };
}

/** Creates the activities with their dependencies (the dependency-injection pattern). */
export function createActivities({ db, secretBox, sender, logger, metrics, sendTraceparent, autoDisable, flow }: ActivityDeps) {
  /**
   * Wakes deliveries given a place, in the background: while Temporal cannot be reached (a restart,
   * its database down) the signals are sent again for about a minute. Past that the deliveries
   * ask again by themselves (turnRecheckMs) and their places go to the next in line.
   */
  const wake = (deliveryIds: readonly string[]) => {
    if (deliveryIds.length === 0) return;
    void (async () => {
      for (const delayMs of [...WAKE_RETRY_DELAYS_MS, undefined]) {
        try {
          await flow.wake(deliveryIds);
          return;
        } catch (error) {
          if (delayMs === undefined) logger.warn({ err: error, deliveryIds }, 'could not wake deliveries waiting for their endpoint');
          else await sleep(delayMs);
        }
      }
    })();
  };

  /** One attempt, its place at the endpoint held. */
  async function attempt(deliveryId: string): Promise<'delivered' | 'gone'> {
    const context = Context.current();
    const started = await startAttempt(db, deliveryId, new Date());
    if (!started) {
      annotateActiveSpan({ [SpanAttributes.outcome]: 'gone' });
      return 'gone';
    }
    const { delivery, webhook, event, attempt } = started;
    annotateActiveSpan({ [SpanAttributes.webhookId]: webhook.id });
    const unsendable = delivery.status === 'delivered' ? undefined : webhook.status === 'disabled' ? 'webhookDisabled' : event.erasedAt ? 'eventErased' : undefined;
    if (unsendable) {
      annotateActiveSpan({ [SpanAttributes.outcome]: unsendable === 'webhookDisabled' ? 'webhook_disabled' : 'event_erased' });
      throw ApplicationFailure.create({
        type: NON_RETRYABLE[unsendable],
        message: NON_RETRYABLE_REASONS[NON_RETRYABLE[unsendable]]!,
        nonRetryable: true,
        category: 'BENIGN',
      });
    }
    if (!attempt) {
      annotateActiveSpan({ [SpanAttributes.outcome]: 'already_delivered' });
      return 'delivered';
    }
    annotateActiveSpan({ [SpanAttributes.attemptNumber]: attempt.attemptNumber });

    const body = buildNotificationBody({
      deliveryId,
      event: delivery.event,
      occurredAt: event.occurredAt,
      data: openPayload(secretBox, event)!,
    });
    const headers = buildNotificationHeaders({
      secret: openWebhookSecret(secretBox, webhook),
      timestampSeconds: Math.floor(Date.now() / 1000),
      body,
      deliveryId,
      event: delivery.event,
      customHeaders: openWebhookHeaders(secretBox, webhook),
    });
    const sent = await tracedExchange(webhook.url, (traceparent) =>
      sender.send({
        url: webhook.url,
        headers: sendTraceparent && traceparent ? { ...headers, traceparent } : headers,
        body,
        signal: context.cancellationSignal,
      }),
    );
    const finishedAt = new Date();
    const delayMs = nextRetryDelay(context.info.attempt, sent.retryAfterMs);
    const result: AttemptResult = {
      attemptId: attempt.attemptId,
      deliveryId,
      webhookId: webhook.id,
      finishedAt,
      ...sent,
      nextStatus: nextAttemptStatus(finishedAt, delayMs),
    };
    annotateActiveSpan({
      [SpanAttributes.outcome]: sent.outcome,
      [SpanAttributes.durationMs]: sent.durationMs,
      [SpanAttributes.deliveryStatus]: sent.outcome === 'succeeded' ? 'delivered' : result.nextStatus.status,
      ...(sent.statusCode !== undefined ? { 'http.response.status_code': sent.statusCode } : {}),
    });
    const recorded = await finishAttempt(db, result, flow.breakerThreshold);
    const outcome = attemptOutcomeLabel(sent.outcome, sent.statusCode);
    metrics.attempts.inc({ outcome });
    metrics.attemptDuration.observe({ outcome }, sent.durationMs / 1000);
    const log = { deliveryId, webhookId: webhook.id, attempt: attempt.attemptNumber, outcome: sent.outcome, statusCode: sent.statusCode, durationMs: sent.durationMs };
    if (!recorded.recorded) logger.warn(log, 'attempt ended after a newer attempt of its delivery had started: its outcome was not recorded');
    if (recorded.circuit) {
      metrics.circuitTransitions.inc({ state: recorded.circuit });
      if (recorded.circuit === 'opened') logger.warn({ webhookId: webhook.id, threshold: flow.breakerThreshold }, 'circuit breaker opened: the endpoint is probed by one attempt at a time');
      else logger.info({ webhookId: webhook.id }, 'circuit breaker closed: the endpoint answered');
    }
    if (context.cancellationSignal.aborted) throw context.cancellationSignal.reason;
    if (sent.outcome === 'succeeded') {
      logger.info(log, 'delivery attempt succeeded');
      if (recorded.recorded) {
        metrics.deliveriesFinished.inc({ status: 'delivered' });
        metrics.publishToDelivered.observe((finishedAt.getTime() - event.createdAt.getTime()) / 1000);
      }
      return 'delivered';
    }
    logger.warn({ ...log, error: sent.error, next: result.nextStatus.status }, 'delivery attempt failed');
    throw ApplicationFailure.create({
      type: `Delivery_${sent.outcome}`,
      message: sent.error ?? sent.outcome,
      category: 'BENIGN',
      ...(sent.retryAfterMs !== undefined ? { nextRetryDelay: delayMs } : {}),
    });
  }

  return {
    /**
     * One signed send of a delivery, recorded as an attempt, once it holds a place at its
     * endpoint. Resolves `delivered` on a 2xx (or if the delivery was already delivered),
     * `gone` if the delivery or its webhook no longer exists, and a {@link SendWait} when it must
     * wait for its endpoint (no attempt made); throws a retryable failure otherwise, and a
     * non-retryable one when the webhook is disabled or the event erased.
     */
    async sendDelivery(deliveryId: string, round: RoundPosition = { attemptsBefore: 0 }): Promise<'delivered' | 'gone' | SendWait> {
      const context = Context.current();
      // Heartbeats carry a cancellation (a manual retry) to a running attempt, and tell the
      // server this worker is alive, from the first statement to the last.
      const heartbeats = setInterval(() => context.heartbeat(), 1_000);
      annotateActiveSpan({ [SpanAttributes.deliveryId]: deliveryId });
      try {
        const permit = await acquireSendPermit(db, deliveryId, flow.limits);
        wake(permit.wake);
        const roundAttempt = round.attemptsBefore + context.info.attempt;
        if (permit.decision === 'wait_turn') {
          annotateActiveSpan({ [SpanAttributes.outcome]: 'waiting_for_turn' });
          metrics.sendWaits.inc({ reason: 'endpoint_busy' });
          return { attempt: roundAttempt, wait: 'turn', recheckMs: turnRecheckMs(permit.ahead, flow.limits) };
        }
        if (permit.decision === 'wait_until') {
          annotateActiveSpan({ [SpanAttributes.outcome]: 'waiting_for_rate_limit' });
          metrics.sendWaits.inc({ reason: 'rate_limit' });
          logger.debug({ deliveryId, waitMs: permit.waitMs }, 'send waits for its rate limit');
          return { attempt: roundAttempt, wait: 'rate', waitMs: permit.waitMs };
        }
        try {
          return await attempt(deliveryId);
        } finally {
          // A place that cannot be given back now lapses after its hold (FlowLimits.holdMs).
          await releaseSendPermit(db, deliveryId, flow.limits).then(wake, (error: unknown) =>
            logger.warn({ err: error, deliveryId }, 'could not give back the send place; it lapses after its hold'),
          );
        }
      } finally {
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
