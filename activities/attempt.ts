/**
 * One send attempt, in the three steps the send activity runs: prepare (open the attempt, build
 * the signed request; in the activity, holding its slot), send (the HTTP exchange, in the worker's
 * background once the activity has handed it off) and record (close the attempt, settle the
 * delivery, update the endpoint's counters and breaker).
 */
import { ApplicationFailure, type RetryPolicy } from '@temporalio/common';
import type { Logger } from 'pino';
import { retryWhileUnavailable, type Database, type UnavailableTries } from '../src/db/client.ts';
import { finishAttempt, SealedDataUnopenableError, startAttempt, type AttemptResult } from '../src/db/queries/deliveries.ts';
import type { DeliveryRow, EventRow, WebhookRow } from '../src/db/schema.ts';
import { buildNotificationBody, buildNotificationHeaders } from '../src/delivery/notification.ts';
import type { Sender, SendResult } from '../src/delivery/sender.ts';
import { newId } from '../src/ids.ts';
import { attemptOutcomeLabel, type Metrics } from '../src/metrics.ts';
import type { SecretBox } from '../src/secrets/crypto.ts';
import { SpanAttributes } from '../src/tracing/attributes.ts';
import { annotateActiveSpan, failActiveSpan, tracedExchange } from '../src/tracing/spans.ts';
import { NON_RETRYABLE, NON_RETRYABLE_REASONS } from '../workflows/failure-types.ts';

/** What the attempt steps need. */
export interface AttemptDeps {
  db: Database;
  secretBox: SecretBox;
  sender: Sender;
  logger: Logger;
  metrics: Metrics;
  /** Send a W3C `traceparent` header naming the attempt's span (DELIVERY_TRACEPARENT; tracing on). */
  sendTraceparent: boolean;
  /** Failed attempts in a row that open an endpoint's circuit breaker (CIRCUIT_BREAKER_THRESHOLD). */
  breakerThreshold: number;
}

/** An attempt opened and its signed request built, ready to send. */
export interface PreparedAttempt {
  deliveryId: string;
  delivery: DeliveryRow;
  webhook: WebhookRow;
  event: EventRow;
  attemptId: string;
  attemptNumber: number;
  body: string;
  headers: Record<string, string>;
}

/** Where the activity attempt stands in its retry policy: what the record step needs to say what comes next. */
export interface PolicyPosition {
  /** The activity's attempt (1 for its first). */
  attempt: number;
  retryPolicy: RetryPolicy | undefined;
}

/**
 * Opens the attempt of `deliveryId` (one statement) and builds its signed request. Answers
 * `gone` when the delivery no longer exists and `delivered` when it was delivered already (no
 * attempt is made); throws a non-retryable failure when its webhook is disabled, its event's
 * data erased, or its sealed data does not open (the attempt then closed as `refused`). While the
 * database is not available (for `tries.reasons`) the statement is tried again, as the same
 * attempt, until `tries.until`: an answer lost after its commit neither counts a second attempt
 * nor leaves a row that never sent anything to be closed as timed out.
 */
export async function prepareAttempt(
  deps: AttemptDeps,
  deliveryId: string,
  tries: UnavailableTries,
): Promise<PreparedAttempt | 'gone' | 'delivered'> {
  const startedAt = new Date();
  const attemptId = newId('attempt', startedAt.getTime());
  const started = await retryWhileUnavailable(() => startAttempt(deps.db, deps.secretBox, deliveryId, startedAt, attemptId), tries).catch((error: unknown) => {
    if (!(error instanceof SealedDataUnopenableError)) throw error;
    annotateActiveSpan({ [SpanAttributes.outcome]: 'sealed_data_unopenable' });
    deps.logger.error({ err: error, deliveryId }, 'a delivery cannot be sent: its sealed data does not open');
    throw ApplicationFailure.create({
      type: NON_RETRYABLE.sealedDataUnopenable,
      message: NON_RETRYABLE_REASONS[NON_RETRYABLE.sealedDataUnopenable]!,
      nonRetryable: true,
    });
  });
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
  const body = buildNotificationBody({ deliveryId, event: delivery.event, occurredAt: event.occurredAt, data: attempt.data });
  const headers = buildNotificationHeaders({
    secrets: attempt.secrets,
    standardWebhooks: webhook.standardWebhooks,
    timestampSeconds: Math.floor(Date.now() / 1000),
    body,
    deliveryId,
    event: delivery.event,
    customHeaders: attempt.customHeaders,
  });
  return { deliveryId, delivery, webhook, event, attemptId: attempt.attemptId, attemptNumber: attempt.attemptNumber, body, headers };
}

/** The HTTP exchange of a prepared attempt, in a CLIENT span; `signal` aborts it (a cancellation). */
export function sendAttempt(deps: AttemptDeps, prepared: PreparedAttempt, signal: AbortSignal): Promise<SendResult> {
  const { url } = prepared.webhook;
  return tracedExchange(url, (traceparent) =>
    deps.sender.send({
      url,
      headers: deps.sendTraceparent && traceparent ? { ...prepared.headers, traceparent } : prepared.headers,
      body: prepared.body,
      signal,
    }),
  );
}

/** The delay before the next automatic attempt: the policy's, or longer if the endpoint asked (Retry-After), within the policy's cap. */
function nextRetryDelay({ attempt, retryPolicy }: PolicyPosition, retryAfterMs: number | undefined): number {
  const initial = Number(retryPolicy?.initialInterval ?? 1000);
  const coefficient = retryPolicy?.backoffCoefficient ?? 2;
  const maximum = Number(retryPolicy?.maximumInterval ?? initial * 100);
  return Math.min(Math.max(initial * coefficient ** (attempt - 1), retryAfterMs ?? 0), maximum);
}

/** The status an attempt leaves its delivery in when it fails: `failed` until the next attempt, or `dead_letter` after the last. */
function nextAttemptStatus({ attempt, retryPolicy }: PolicyPosition, finishedAt: Date, delayMs: number): AttemptResult['nextStatus'] {
  const maximumAttempts = retryPolicy?.maximumAttempts ?? 0;
  if (maximumAttempts > 0 && attempt >= maximumAttempts) return { status: 'dead_letter' };
  return { status: 'failed', nextRetryAt: new Date(finishedAt.getTime() + delayMs) };
}

/**
 * Records how a sent attempt ended (one fenced statement: nothing is written when a newer attempt
 * or the round's dead letter closed its row) and says so in metrics, logs and the trace. Answers
 * `delivered`, or the failure for the retry policy (its delay overridden when the endpoint asked
 * for a later retry) and, after a timeout in a round that goes on, how long its places are kept
 * for the next attempt.
 */
export async function recordAttempt(
  deps: AttemptDeps,
  prepared: PreparedAttempt,
  sent: SendResult,
  position: PolicyPosition,
): Promise<{ delivered: true } | { delivered: false; failure: ApplicationFailure; keepPlacesForMs?: number }> {
  const { deliveryId, webhook, event, attemptNumber } = prepared;
  const finishedAt = new Date();
  const delayMs = nextRetryDelay(position, sent.retryAfterMs);
  const { operatorDetail: _logsOnly, ...stored } = sent;
  const result: AttemptResult = {
    attemptId: prepared.attemptId,
    deliveryId,
    webhookId: webhook.id,
    finishedAt,
    ...stored,
    nextStatus: nextAttemptStatus(position, finishedAt, delayMs),
  };
  annotateActiveSpan({
    [SpanAttributes.outcome]: sent.outcome,
    [SpanAttributes.durationMs]: sent.durationMs,
    [SpanAttributes.deliveryStatus]: sent.outcome === 'succeeded' ? 'delivered' : result.nextStatus.status,
    ...(sent.statusCode !== undefined ? { 'http.response.status_code': sent.statusCode } : {}),
  });
  const recorded = await finishAttempt(deps.db, result, deps.breakerThreshold);
  const outcome = attemptOutcomeLabel(sent.outcome, sent.statusCode);
  deps.metrics.attempts.inc({ outcome });
  deps.metrics.attemptDuration.observe({ outcome }, sent.durationMs / 1000);
  const log = { deliveryId, webhookId: webhook.id, attempt: attemptNumber, outcome: sent.outcome, statusCode: sent.statusCode, durationMs: sent.durationMs };
  if (!recorded.recorded) deps.logger.warn(log, 'attempt ended after a newer attempt of its delivery had started: its outcome was not recorded');
  else if (recorded.byEarlierTry) deps.logger.info(log, 'attempt outcome recorded by an earlier try whose answer was lost with its connection');
  if (recorded.circuit) {
    deps.metrics.circuitTransitions.inc({ state: recorded.circuit });
    if (recorded.circuit === 'opened') deps.logger.warn({ webhookId: webhook.id, threshold: deps.breakerThreshold }, 'circuit breaker opened: the endpoint is probed by one attempt at a time');
    else deps.logger.info({ webhookId: webhook.id }, 'circuit breaker closed: the endpoint answered');
  }
  if (sent.outcome === 'succeeded') {
    deps.logger.info(log, 'delivery attempt succeeded');
    if (recorded.recorded) {
      deps.metrics.deliveriesFinished.inc({ status: 'delivered' });
      deps.metrics.publishToDelivered.observe((finishedAt.getTime() - event.createdAt.getTime()) / 1000);
    }
    return { delivered: true };
  }
  deps.logger.warn({ ...log, error: sent.error, detail: sent.operatorDetail, next: result.nextStatus.status }, 'delivery attempt failed');
  failActiveSpan(sent.error ?? sent.outcome);
  return {
    delivered: false,
    // After a timeout, when the round goes on: its places are kept for the next attempt, after this backoff.
    ...(sent.outcome === 'timeout' && result.nextStatus.status === 'failed' && { keepPlacesForMs: delayMs }),
    failure: ApplicationFailure.create({
      type: `Delivery_${sent.outcome}`,
      message: sent.error ?? sent.outcome,
      category: 'BENIGN',
      ...(sent.retryAfterMs !== undefined ? { nextRetryDelay: delayMs } : {}),
    }),
  };
}
