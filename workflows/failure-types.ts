/** Failure types the send activity throws that no retry can fix (shared with the workflow). */
export const NON_RETRYABLE = {
  webhookDisabled: 'WebhookDisabled',
  eventErased: 'EventErased',
  sealedDataUnopenable: 'SealedDataUnopenable',
} as const;

/** The `last_error` a delivery is dead-lettered with after each non-retryable failure. */
export const NON_RETRYABLE_REASONS: Record<string, string> = {
  [NON_RETRYABLE.webhookDisabled]: 'webhook is disabled',
  [NON_RETRYABLE.eventErased]: "the event's data was erased (data-subject request); nothing to send",
  [NON_RETRYABLE.sealedDataUnopenable]:
    "the event's data or the webhook's secret or headers do not open (sealed under a key the service no longer has, or altered); nothing was sent: the operator restores the key, then retry",
};
