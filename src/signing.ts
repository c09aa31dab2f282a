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
