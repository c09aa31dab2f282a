/**
 * What is sealed at rest, with the key ring of SECRET_ENCRYPTION_KEY (AES-256-GCM), each value
 * bound to its row so that a value copied onto another row does not open:
 * - an event's `data`, bound to the event's id, and findable by its `request_id` through a keyed
 *   hash only;
 * - a webhook's signing secret (and the one a rotation replaced, during its grace period) and its
 *   custom headers (often an `Authorization` value for the customer's own endpoint), bound to the
 *   webhook's id and the field;
 * - a signing secret the customer portal has still to show once, bound to the portal session and
 *   the webhook.
 *
 * The queries that store these rows (src/db/queries/) seal and open them with this module.
 */
import type { EventRow, WebhookRow } from './schema.ts';
import type { SecretBox } from '../secrets/crypto.ts';

// Event payloads

/** What is authenticated with an event's sealed payload: it opens for that event only. */
const payloadSealContext = (eventId: string) => `event:${eventId}`;

/** The value behind an event's request-id lookup hash (per project, so projects never correlate). */
const requestIdKey = (projectId: string, requestId: string) => JSON.stringify([projectId, requestId]);

/** The stored form of an event's data: the sealed payload and its request-id lookup hash. */
export function sealPayload(box: SecretBox, eventId: string, projectId: string, data: Record<string, unknown>) {
  return {
    payloadSealed: box.seal(JSON.stringify(data), payloadSealContext(eventId)),
    requestIdHash: typeof data['request_id'] === 'string' ? box.lookupHash(requestIdKey(projectId, data['request_id'])) : null,
  };
}

/** The event's data, opened; undefined once it has been erased. */
export function openPayload(box: SecretBox, event: Pick<EventRow, 'id' | 'payloadSealed' | 'payloadLegacy'>): Record<string, unknown> | undefined {
  if (event.payloadSealed) return JSON.parse(box.open(event.payloadSealed, payloadSealContext(event.id))) as Record<string, unknown>;
  return event.payloadLegacy ?? undefined;
}

/** Every lookup hash an event of `projectId` with this `request_id` may carry (one per key of the ring). */
export function requestIdHashes(box: SecretBox, projectId: string, requestId: string): string[] {
  return box.lookupHashes(requestIdKey(projectId, requestId));
}

// Webhook secrets and headers

type SealedField = 'secret' | 'headers';

/** What is authenticated with a sealed value: it opens for that webhook and that field only. */
const webhookSealContext = (webhookId: string, field: SealedField) => `webhook:${webhookId}:${field}`;

/** A webhook's sealed secret or headers that do not open: sealed for another webhook, altered, or under a key not configured. */
export class UnopenableWebhookError extends Error {
  override name = 'UnopenableWebhookError';
}

const unopenable = (webhookId: string, field: SealedField, error: unknown) =>
  new UnopenableWebhookError(
    `the sealed ${field} of webhook ${webhookId} does not open (sealed for another webhook, altered, or under a key not configured): ${(error as Error).message}`,
  );

/** The signing secret, and whether it was bound to its row (false: sealed by a release before binding). */
function openSecret(box: SecretBox, webhook: Pick<WebhookRow, 'id' | 'secretSealed'>): { secret: string; bound: boolean } {
  try {
    return { secret: box.open(webhook.secretSealed, webhookSealContext(webhook.id, 'secret')), bound: true };
  } catch (error) {
    // Releases before binding sealed secrets without a context, and such a value still opens
    // until `secrets reseal` binds it. A value bound to another row opens neither way.
    try {
      return { secret: box.open(webhook.secretSealed), bound: false };
    } catch {
      throw unopenable(webhook.id, 'secret', error);
    }
  }
}

/** The stored form of a webhook's signing secret. */
export const sealWebhookSecret = (box: SecretBox, webhookId: string, secret: string): string =>
  box.seal(secret, webhookSealContext(webhookId, 'secret'));

/** The stored form of a webhook's custom headers. */
export const sealWebhookHeaders = (box: SecretBox, webhookId: string, headers: Record<string, string>): string =>
  box.seal(JSON.stringify(headers), webhookSealContext(webhookId, 'headers'));

/** Whether the secret a rotation replaced still signs at `at`. */
export const previousSecretValid = (webhook: Pick<WebhookRow, 'previousSecretExpiresAt'>, at: Date): boolean =>
  webhook.previousSecretExpiresAt !== null && webhook.previousSecretExpiresAt > at;

/**
 * The secrets that sign a send at `at`: the current one, then the one a rotation replaced while
 * its grace period lasts. The previous secret is the current one's former sealed value, moved
 * over unopened, so it opens the same way; it is opened only while it is valid.
 */
export function openWebhookSigningSecrets(
  box: SecretBox,
  webhook: Pick<WebhookRow, 'id' | 'secretSealed' | 'previousSecretSealed' | 'previousSecretExpiresAt'>,
  at: Date,
): string[] {
  const current = openSecret(box, webhook).secret;
  if (!previousSecretValid(webhook, at) || webhook.previousSecretSealed === null) return [current];
  return [current, openSecret(box, { id: webhook.id, secretSealed: webhook.previousSecretSealed }).secret];
}

/** The webhook's custom headers, opened (or as an earlier release stored them in clear). */
export function openWebhookHeaders(box: SecretBox, webhook: Pick<WebhookRow, 'id' | 'headersSealed' | 'headersLegacy'>): Record<string, string> {
  if (webhook.headersSealed === null) return webhook.headersLegacy ?? {};
  try {
    return JSON.parse(box.open(webhook.headersSealed, webhookSealContext(webhook.id, 'headers'))) as Record<string, string>;
  } catch (error) {
    throw unopenable(webhook.id, 'headers', error);
  }
}

/**
 * The row's secret and headers sealed anew under the current key and bound to its id, or
 * undefined when they already are: what `secrets reseal` writes. A previous secret whose grace
 * period ended by `at` signs nothing any more: it is erased, not resealed (and need not open).
 */
export function resealedWebhook(
  box: SecretBox,
  webhook: Pick<WebhookRow, 'id' | 'secretSealed' | 'headersSealed' | 'headersLegacy' | 'previousSecretSealed' | 'previousSecretExpiresAt'>,
  at: Date,
): Pick<WebhookRow, 'secretSealed' | 'headersSealed' | 'headersLegacy' | 'previousSecretSealed' | 'previousSecretExpiresAt'> | undefined {
  const { secret, bound } = openSecret(box, webhook);
  const headers = openWebhookHeaders(box, webhook);
  const expiredPrevious = webhook.previousSecretSealed !== null && !previousSecretValid(webhook, at);
  const previous =
    webhook.previousSecretSealed === null || expiredPrevious ? undefined : openSecret(box, { id: webhook.id, secretSealed: webhook.previousSecretSealed });
  const current =
    bound &&
    !expiredPrevious &&
    !box.sealedWithOldKey(webhook.secretSealed) &&
    webhook.headersSealed !== null &&
    !box.sealedWithOldKey(webhook.headersSealed) &&
    (previous === undefined || (previous.bound && !box.sealedWithOldKey(webhook.previousSecretSealed!)));
  if (current) return undefined;
  return {
    secretSealed: sealWebhookSecret(box, webhook.id, secret),
    headersSealed: sealWebhookHeaders(box, webhook.id, headers),
    headersLegacy: null,
    previousSecretSealed: previous === undefined ? null : sealWebhookSecret(box, webhook.id, previous.secret),
    previousSecretExpiresAt: previous === undefined ? null : webhook.previousSecretExpiresAt,
  };
}

// Portal secret reveals

/** A signing secret the portal shows once, on the page its change redirects to. */
export interface SecretReveal {
  webhookId: string;
  secret: string;
  /** What made it: the endpoint's creation, or a rotation. */
  change: 'created' | 'rotated';
  /** What the page says of the change besides. */
  notice?: string | undefined;
}

/** What is authenticated with a sealed reveal: it opens for that portal session and webhook only. */
const revealSealContext = (sessionId: string, webhookId: string) => `portal-session:${sessionId}:secret-reveal:${webhookId}`;

export const sealSecretReveal = (box: SecretBox, sessionId: string, reveal: SecretReveal): string =>
  box.seal(JSON.stringify(reveal), revealSealContext(sessionId, reveal.webhookId));

export const openSecretReveal = (box: SecretBox, sessionId: string, webhookId: string, sealed: string): SecretReveal =>
  JSON.parse(box.open(sealed, revealSealContext(sessionId, webhookId))) as SecretReveal;
