import type { DeliveryAttemptRow, DeliveryRow, WebhookRow } from '../db/schema.ts';
import { previousSecretValid } from '../db/sealing.ts';
import { DELIVERY_RETRY_POLICY } from '../../workflows/delivery.ts';

/** The retry policy the delivery workflow really uses, in the spec's field names; delays in seconds. */
export const RETRY_CONFIG = {
  max_retries: DELIVERY_RETRY_POLICY.maximumAttempts,
  initial_delay: DELIVERY_RETRY_POLICY.initialInterval / 1000,
  max_delay: DELIVERY_RETRY_POLICY.maximumInterval / 1000,
  backoff_multiplier: DELIVERY_RETRY_POLICY.backoffCoefficient,
};

const iso = (date: Date | null) => (date ? date.toISOString() : undefined);

/** Drops undefined fields, so absent values are absent rather than null. */
function compact<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}

/** The list variant of a webhook configuration (spec 2.1). */
export function webhookListItem(row: WebhookRow) {
  return compact({
    id: row.id,
    api_key_id: row.apiKeyId,
    project_id: row.projectId,
    url: row.url,
    events: row.events,
    status: row.status,
    success_count: row.successCount,
    failure_count: row.failureCount,
    last_delivered_at: iso(row.lastDeliveredAt),
    disabled_reason: row.disabledReason ?? undefined,
    disabled_at: iso(row.disabledAt),
    rate_limit: row.rateLimit ?? undefined,
    circuit_state: row.circuitOpenedAt ? ('open' as const) : ('closed' as const),
    circuit_opened_at: iso(row.circuitOpenedAt),
    consecutive_failures: row.consecutiveFailures,
    standard_webhooks: row.standardWebhooks,
    previous_secret_expires_at: iso(previousSecretValid(row, new Date()) ? row.previousSecretExpiresAt : null),
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  });
}

/** A whole webhook configuration, without the secret; `headers` are its custom headers, opened. */
export function webhookResource(row: WebhookRow, headers: Record<string, string>) {
  return { ...webhookListItem(row), headers, retry_config: RETRY_CONFIG };
}

/** A delivery record (spec 2.2). */
export function deliveryResource(row: DeliveryRow) {
  return compact({
    id: row.id,
    webhook_config_id: row.webhookId,
    event: row.event,
    status: row.status,
    attempt_count: row.attemptCount,
    created_at: row.createdAt.toISOString(),
    delivered_at: iso(row.deliveredAt),
    last_error: row.lastError ?? undefined,
    last_status_code: row.lastStatusCode ?? undefined,
    next_retry_at: iso(row.nextRetryAt),
  });
}

/** One attempt of a delivery. */
export function attemptResource(row: DeliveryAttemptRow) {
  return compact({
    id: row.id,
    delivery_id: row.deliveryId,
    attempt_number: row.attemptNumber,
    started_at: row.startedAt.toISOString(),
    duration_ms: row.durationMs ?? undefined,
    status_code: row.statusCode ?? undefined,
    outcome: row.outcome,
    error: row.error ?? undefined,
  });
}
