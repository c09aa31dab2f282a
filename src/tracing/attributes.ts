/**
 * The service's own span attributes, beside OpenTelemetry's semantic conventions (`http.*`,
 * `server.*`, `error.type`). Ids, counts, outcomes and status codes only: never a secret, a
 * header, a URL path or query, or event data (docs/architecture.md, "Tracing").
 */
export const SpanAttributes = {
  /** The delivery (`dlv_…`, the workflow id). */
  deliveryId: 'webhooks.delivery.id',
  /** The webhook configuration (`wh_…`). */
  webhookId: 'webhooks.webhook.id',
  /** The accepted event (`evt_…`). */
  eventId: 'webhooks.event.id',
  /** Deliveries an accepted event made. */
  deliveryCount: 'webhooks.event.delivery_count',
  /** The delivery's attempt number (its `attempt_count` once the attempt started; 1 for the first). */
  attemptNumber: 'webhooks.attempt.number',
  /**
   * How the send ended: an attempt's outcome (`succeeded`, `http_error`, `timeout`,
   * `network_error`, `refused`), or why no attempt was made (`waiting_for_turn`,
   * `waiting_for_rate_limit`, `waiting_for_recovery_pace`, `waiting_for_breaker_probe`,
   * `waiting_for_previous_attempt`, `waiting_for_database`, `waiting_for_another_worker`,
   * `already_delivered`, `gone`, `webhook_disabled`, `event_erased`, `sealed_data_unopenable`).
   */
  outcome: 'webhooks.attempt.outcome',
  /** How long the HTTP exchange of the attempt took, connect included. */
  durationMs: 'webhooks.attempt.duration_ms',
  /** The delivery's status after the attempt: `delivered`, `failed` or `dead_letter`. */
  deliveryStatus: 'webhooks.delivery.status',
  /** Why a delivery was dead-lettered (the service's own text, as in `last_error`). */
  deadLetterReason: 'webhooks.dead_letter.reason',
} as const;
