/** Failure types the send activity throws that no retry can fix (shared with the workflow). */
export const NON_RETRYABLE = {
  webhookDisabled: 'WebhookDisabled',
} as const;
