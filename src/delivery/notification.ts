import { computeSignatureHeader, computeStandardWebhooksSignature, SIGNATURE_HEADERS, STANDARD_WEBHOOKS_HEADERS } from '../signing.ts';

/** API version carried in every notification body (spec 6.2). */
export const PAYLOAD_API_VERSION = 'v1';

/** What a notification is built from. */
export interface NotificationSource {
  deliveryId: string;
  event: string;
  occurredAt: Date;
  data: Record<string, unknown>;
}

/**
 * The notification body (spec 6.2). It depends only on stored values, so its bytes are
 * the same on every attempt of a delivery.
 */
export function buildNotificationBody(source: NotificationSource): string {
  return JSON.stringify({
    id: source.deliveryId,
    event: source.event,
    timestamp: source.occurredAt.toISOString(),
    api_version: PAYLOAD_API_VERSION,
    data: source.data,
  });
}

/** Header names the service sets itself (lower case), besides those starting {@link RESERVED_HEADER_PREFIX}. */
export const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'host',
  'transfer-encoding',
  'connection',
  // The service names itself, and with DELIVERY_TRACEPARENT sends the attempt's trace: a custom value would be replaced.
  'user-agent',
  'traceparent',
  ...Object.values(STANDARD_WEBHOOKS_HEADERS),
]);
export const RESERVED_HEADER_PREFIX = 'x-service-';

/** Whether a header name is one the service sets itself (never a custom header). */
export function isReservedHeaderName(name: string): boolean {
  const lower = name.toLowerCase();
  return RESERVED_HEADER_NAMES.has(lower) || lower.startsWith(RESERVED_HEADER_PREFIX);
}

/**
 * Headers of one send: the webhook's custom headers, then the service's own, which
 * always win (custom headers cannot spoof them; the API also refuses such names). Each of
 * `secrets` signs, the current one first; with `standardWebhooks` the Standard Webhooks headers
 * are added beside the service's own.
 */
export function buildNotificationHeaders(input: {
  secrets: readonly string[];
  standardWebhooks: boolean;
  timestampSeconds: number;
  body: string;
  deliveryId: string;
  event: string;
  customHeaders: Record<string, string>;
}): Record<string, string> {
  const custom = Object.fromEntries(
    Object.entries(input.customHeaders).filter(([name]) => !isReservedHeaderName(name)),
  );
  return {
    ...custom,
    'Content-Type': 'application/json',
    [SIGNATURE_HEADERS.signature]: computeSignatureHeader(input.secrets, input.timestampSeconds, input.body),
    [SIGNATURE_HEADERS.timestamp]: String(input.timestampSeconds),
    [SIGNATURE_HEADERS.deliveryId]: input.deliveryId,
    [SIGNATURE_HEADERS.event]: input.event,
    'User-Agent': 'webhook-delivery-service/1',
    ...(input.standardWebhooks && {
      [STANDARD_WEBHOOKS_HEADERS.id]: input.deliveryId,
      [STANDARD_WEBHOOKS_HEADERS.timestamp]: String(input.timestampSeconds),
      [STANDARD_WEBHOOKS_HEADERS.signature]: computeStandardWebhooksSignature(input.secrets, input.deliveryId, input.timestampSeconds, input.body),
    }),
  };
}
