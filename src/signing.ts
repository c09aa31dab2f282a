/**
 * Webhook request signing (spec section 6.4), shared by the delivery worker
 * that signs outgoing notifications and the receiver library that verifies them.
 *
 * The signed message is `<timestamp>.<raw body bytes>`; the signature is
 * `v1=` followed by the lowercase-hex HMAC-SHA256 of that message, keyed with
 * the UTF-8 bytes of the webhook secret exactly as shown to the customer.
 *
 * @module
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Version prefix of the signature scheme, as in `v1=<hex>`. */
export const SIGNATURE_VERSION = 'v1';

/** Names of the headers the service adds to every notification request. */
export const SIGNATURE_HEADERS = {
  signature: 'X-Service-Signature',
  timestamp: 'X-Service-Timestamp',
  deliveryId: 'X-Service-Delivery-ID',
  event: 'X-Service-Event',
} as const;

/**
 * Computes the value of the `X-Service-Signature` header.
 *
 * @param secret - The webhook secret as shown to the customer (e.g. `whsec_...`); its UTF-8 bytes are the HMAC key.
 * @param timestamp - Unix time in seconds, exactly as sent in `X-Service-Timestamp`.
 * @param rawBody - The request body; a string is signed as UTF-8, a `Uint8Array` byte for byte.
 * @returns `v1=` followed by 64 lowercase hex characters.
 */
export function computeSignature(
  secret: string,
  timestamp: number | string,
  rawBody: string | Uint8Array,
): string {
  const message =
    typeof rawBody === 'string'
      ? Buffer.from(`${timestamp}.${rawBody}`, 'utf8')
      : Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), rawBody]);
  const digest = createHmac('sha256', secret).update(message).digest('hex');
  return `${SIGNATURE_VERSION}=${digest}`;
}

/**
 * The `X-Service-Signature` header of a send signed by several secrets (during a rotation's
 * grace period): one `v1=<hex>` per secret, in the order given, space-separated.
 */
export function computeSignatureHeader(secrets: readonly string[], timestamp: number | string, rawBody: string | Uint8Array): string {
  return secrets.map((secret) => computeSignature(secret, timestamp, rawBody)).join(' ');
}

/** Names of the Standard Webhooks headers (standardwebhooks.com), sent when a webhook asks for them. */
export const STANDARD_WEBHOOKS_HEADERS = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
} as const;

/** The prefix of a secret in the Standard Webhooks form; what follows it is the key, base64. */
const STANDARD_SECRET_PREFIX = 'whsec_';

/**
 * The HMAC key Standard Webhooks derives from a secret: the bytes the base64 after `whsec_`
 * encodes. The service's secrets have that form, so one secret serves both schemes: the
 * service's own signature is keyed with the secret string's UTF-8 bytes, the Standard Webhooks
 * signature with the 32 bytes it encodes.
 */
export function standardWebhooksKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(STANDARD_SECRET_PREFIX) ? secret.slice(STANDARD_SECRET_PREFIX.length) : secret, 'base64');
}

/**
 * Computes the value of the `webhook-signature` header (Standard Webhooks): `v1,` and the base64
 * HMAC-SHA256 of `<message id>.<timestamp>.<raw body>` per secret, space-separated.
 */
export function computeStandardWebhooksSignature(
  secrets: readonly string[],
  messageId: string,
  timestamp: number | string,
  rawBody: string | Uint8Array,
): string {
  const prefix = Buffer.from(`${messageId}.${timestamp}.`, 'utf8');
  const message = Buffer.concat([prefix, typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody]);
  return secrets.map((secret) => `v1,${createHmac('sha256', standardWebhooksKey(secret)).update(message).digest('base64')}`).join(' ');
}

/**
 * Compares two signature strings in constant time.
 *
 * @param expected - The signature computed locally.
 * @param received - The signature taken from the request.
 * @returns `true` when both are byte-for-byte equal; `false` otherwise, including when their lengths differ.
 */
export function signatureMatches(expected: string, received: string): boolean {
  const expectedBytes = Buffer.from(expected, 'utf8');
  const receivedBytes = Buffer.from(received, 'utf8');
  if (expectedBytes.length !== receivedBytes.length) return false;
  return timingSafeEqual(expectedBytes, receivedBytes);
}
