import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import { finishAttempt, markDeadLetter, startAttempt, type AttemptResult } from '../src/db/queries/deliveries.ts';
import { buildNotificationBody, buildNotificationHeaders } from '../src/delivery/notification.ts';
import { openPayload } from '../src/events/payload.ts';
import { disableIfFailing, type AutoDisableRule } from '../src/endpoint-health/auto-disable.ts';
import type { Sender } from '../src/delivery/sender.ts';
import { attemptOutcomeLabel, type Metrics } from '../src/metrics.ts';
import type { SecretBox } from '../src/secrets.ts';
import { NON_RETRYABLE, NON_RETRYABLE_REASONS } from '../workflows/failure-types.ts';

/** What the activities need; the worker passes real instances. */
export interface ActivityDeps {
  db: Database;
  secretBox: SecretBox;
  sender: Sender;
  logger: Logger;
  metrics: Metrics;
  /** Endpoint health: when a dead letter disables its webhook. */
  autoDisable: AutoDisableRule;
}

/** When the next automatic attempt is due, from the activity's own retry policy. */
function nextAttemptStatus(finishedAt: Date): AttemptResult['nextStatus'] {
  const { attempt, retryPolicy } = Context.current().info;
  const maximumAttempts = retryPolicy?.maximumAttempts ?? 0;
  if (maximumAttempts > 0 && attempt >= maximumAttempts) return { status: 'dead_letter' };
  const initial = Number(retryPolicy?.initialInterval ?? 1000);
  const coefficient = retryPolicy?.backoffCoefficient ?? 2;
  const maximum = Number(retryPolicy?.maximumInterval ?? initial * 100);
  const delay = Math.min(initial * coefficient ** (attempt - 1), maximum);
  return { status: 'failed', nextRetryAt: new Date(finishedAt.getTime() + delay) };
}

/** Creates the activities with their dependencies (the dependency-injection pattern). */
export function createActivities({ db, secretBox, sender, logger, metrics, autoDisable }: ActivityDeps) {
  return {
    /**
     * One signed send of a delivery, recorded as an attempt. Resolves `delivered` on a 2xx
     * (or if the delivery was already delivered) and `gone` if the delivery or its webhook
     * no longer exists; throws a retryable failure otherwise, and a non-retryable one when
     * the webhook is disabled.
     */
    async sendDelivery(deliveryId: string): Promise<'delivered' | 'gone'> {
      const started = await startAttempt(db, deliveryId, new Date());
      if (!started) return 'gone';
      const { delivery, webhook, event, attempt } = started;
      const unsendable = delivery.status === 'delivered' ? undefined : webhook.status === 'disabled' ? 'webhookDisabled' : event.erasedAt ? 'eventErased' : undefined;
      if (unsendable) {
        throw ApplicationFailure.create({
          type: NON_RETRYABLE[unsendable],
          message: NON_RETRYABLE_REASONS[NON_RETRYABLE[unsendable]]!,
          nonRetryable: true,
          category: 'BENIGN',
        });
      }
      if (!attempt) return 'delivered';

      const body = buildNotificationBody({
        deliveryId,
        event: delivery.event,
        occurredAt: event.occurredAt,
        data: openPayload(secretBox, event)!,
      });
      const headers = buildNotificationHeaders({
        secret: secretBox.open(webhook.secretSealed),
        timestampSeconds: Math.floor(Date.now() / 1000),
        body,
        deliveryId,
        event: delivery.event,
        customHeaders: webhook.headers,
      });
      const sent = await sender.send({
        url: webhook.url,
        headers,
        body,
        signal: Context.current().cancellationSignal,
      });
      const finishedAt = new Date();
      const result: AttemptResult = {
        attemptId: attempt.attemptId,
        deliveryId,
        webhookId: webhook.id,
        finishedAt,
        ...sent,
        nextStatus: nextAttemptStatus(finishedAt),
      };
      await finishAttempt(db, result);
      const outcome = attemptOutcomeLabel(sent.outcome, sent.statusCode);
      metrics.attempts.inc({ outcome });
      metrics.attemptDuration.observe({ outcome }, sent.durationMs / 1000);
      const log = { deliveryId, webhookId: webhook.id, attempt: attempt.attemptNumber, outcome: sent.outcome, statusCode: sent.statusCode, durationMs: sent.durationMs };
      if (sent.outcome === 'succeeded') {
        logger.info(log, 'delivery attempt succeeded');
        metrics.deliveriesFinished.inc({ status: 'delivered' });
        metrics.publishToDelivered.observe((finishedAt.getTime() - event.createdAt.getTime()) / 1000);
        return 'delivered';
      }
      logger.warn({ ...log, error: sent.error, next: result.nextStatus.status }, 'delivery attempt failed');
      throw ApplicationFailure.create({
        type: `Delivery_${sent.outcome}`,
        message: sent.error ?? sent.outcome,
        category: 'BENIGN',
      });
    },

    /** Ends a round in `dead_letter` (idempotent). */
    async markDeadLetter(deliveryId: string, reason?: string): Promise<void> {
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
