/**
 * Verifies webhook notifications sent by the service (spec sections 6.2 and 6.4).
 * Depends only on Node built-ins, so it can be copied into any receiver.
 *
 * @example
 * ```ts
 * import { verifyWebhook, WebhookVerificationError } from 'webhook-delivery-service/receiver';
 *
 * // rawBody: the exact bytes received (Buffer/Uint8Array or string), never re-serialised JSON.
 * try {
 *   const payload = verifyWebhook({ rawBody, headers: req.headers, secret: process.env.WEBHOOK_SECRET! });
 *   // payload.id identifies the delivery: deduplicate on it, answer 2xx, then process asynchronously.
 * } catch (error) {
 *   if (error instanceof WebhookVerificationError) {
 *     // error.code tells why, e.g. 'signature_mismatch'; answer 400.
 *   }
 *   throw error;
 * }
 * ```
 *
 * @module
 */
import { computeSignature, SIGNATURE_HEADERS, SIGNATURE_VERSION, signatureMatches } from '../signing.ts';

/** Default replay window in seconds: timestamps further than this in the past or the future are refused. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** Document authentication details (spec 6.2); which fields are always present is not specified. */
export interface DocauthInfo {
  document_type?: string;
  country_code?: string;
  nationality_code?: string;
  nationality_name?: string;
  sex?: string;
  first_name?: string;
  father_name?: string;
  last_name?: string;
  /** Date, `YYYY-MM-DD`. */
  expiry_date?: string;
  document_number?: string;
  /** Date, `YYYY-MM-DD`. */
  birth_date?: string;
  /** Outcome word such as a pass/fail result. */
  current_result?: string;
}

/** `data` of a `docauth.completed` notification. */
export interface DocauthCompletedData {
  /** Identifier of the original document-authentication request. */
  request_id: string;
  /** Present when a session identifier was given in the original request. */
  session_id?: string;
  result: 'pass' | 'fail';
  docauth_info: DocauthInfo;
  /** ISO 8601 time the document was processed. */
  processed_at: string;
  scores_applied: boolean;
}

/** Body of a notification request. */
export interface WebhookPayload {
  /** Unique delivery ID, stable across retries of the same notification: deduplicate on it. */
  id: string;
  /** Event kind, e.g. `docauth.completed`. */
  event: string;
  /** ISO 8601 time the event occurred. */
  timestamp: string;
  /** Version of the payload format, currently `v1`. */
  api_version: string;
  data: DocauthCompletedData;
}

/** Why a request was refused by {@link verifyWebhook}. */
export type WebhookVerificationErrorCode =
  | 'missing_signature'
  | 'missing_timestamp'
  | 'malformed_signature'
  | 'malformed_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'signature_mismatch'
  | 'invalid_payload';

/** Thrown by {@link verifyWebhook} when a request is not a genuine, fresh, well-formed notification. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';

  /** Machine-readable reason. */
  readonly code: WebhookVerificationErrorCode;

  /**
   * @param code - Machine-readable reason.
   * @param message - Human-readable detail.
   */
  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * Request headers: a plain object such as node:http `IncomingHttpHeaders` (keys matched
 * case-insensitively) or a WHATWG `Headers` instance (Fetch API, Hono, Next.js).
 */
export type WebhookHeaders =
  | { readonly [name: string]: string | readonly string[] | undefined }
  | { get(name: string): string | null };

/** Input of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /** The request body exactly as received. */
  rawBody: string | Uint8Array;
  headers: WebhookHeaders;
  /** The webhook secret, or several (old and new during a rotation): any match is accepted. */
  secret: string | readonly string[];
  /** Replay window in seconds, {@link WEBHOOK_TOLERANCE_SECONDS} by default. */
  toleranceSeconds?: number;
  /** Current time as a `Date` or milliseconds since the epoch; defaults to `Date.now()`. */
  now?: Date | number;
}

const V1_SIGNATURE_PATTERN = /^[0-9a-f]{64}$/;
const TIMESTAMP_PATTERN = /^[0-9]+$/;

/**
 * Checks that a notification was signed by the service with the webhook secret and is recent,
 * then parses its body.
 *
 * Checks run in this order: signature and timestamp headers present, their formats,
 * timestamp within the replay window, signature, payload shape.
 *
 * @returns The parsed notification body.
 * @throws {@link WebhookVerificationError} when the request must be refused; its `code` says why.
 * @throws `TypeError` or `RangeError` when the options themselves are unusable (e.g. an empty secret).
 */
export function verifyWebhook({
  rawBody,
  headers,
  secret,
  toleranceSeconds = WEBHOOK_TOLERANCE_SECONDS,
  now = Date.now(),
}: VerifyWebhookOptions): WebhookPayload {
  const secrets = validSecrets(secret);
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) {
    throw new RangeError('toleranceSeconds must be a non-negative finite number');
  }

  const readHeader = headerReader(headers);
  const signatureHeader = readHeader(SIGNATURE_HEADERS.signature);
  if (signatureHeader === undefined) {
    throw new WebhookVerificationError('missing_signature', `Missing ${SIGNATURE_HEADERS.signature} header`);
  }
  const timestampHeader = readHeader(SIGNATURE_HEADERS.timestamp);
  if (timestampHeader === undefined) {
    throw new WebhookVerificationError('missing_timestamp', `Missing ${SIGNATURE_HEADERS.timestamp} header`);
  }

  const receivedSignatures = parseSignatureHeader(signatureHeader);
  const timestampSeconds = parseTimestamp(timestampHeader);

  const nowSeconds = (typeof now === 'number' ? now : now.getTime()) / 1000;
  const skewSeconds = nowSeconds - timestampSeconds;
  if (Math.abs(skewSeconds) > toleranceSeconds) {
    const direction = skewSeconds > 0 ? 'in the past' : 'in the future';
    throw new WebhookVerificationError(
      'timestamp_out_of_tolerance',
      `${SIGNATURE_HEADERS.timestamp} is ${Math.round(Math.abs(skewSeconds))} s ${direction}, beyond the ${toleranceSeconds} s tolerance`,
    );
  }

  // Sign the header text as received, so the message is byte-identical to what the sender signed.
  const expectedSignatures = secrets.map((candidate) => computeSignature(candidate, timestampHeader, rawBody));
  const genuine = expectedSignatures.some((expected) =>
    receivedSignatures.some((received) => signatureMatches(expected, received)),
  );
  if (!genuine) {
    throw new WebhookVerificationError(
      'signature_mismatch',
      `No ${SIGNATURE_VERSION} signature in ${SIGNATURE_HEADERS.signature} matches the body and timestamp for the given secret`,
    );
  }

  return parsePayload(rawBody);
}

function validSecrets(secret: string | readonly string[]): readonly string[] {
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new TypeError('secret must be a non-empty string or a non-empty array of them');
  }
  // An empty key (e.g. an unset environment variable) would let anyone forge signatures.
  if (!secrets.every((candidate) => typeof candidate === 'string' && candidate.length > 0)) {
    throw new TypeError('every webhook secret must be a non-empty string');
  }
  return secrets;
}

/** Returns a lookup by case-insensitive name; repeated headers are joined with `, ` as `Headers.get` does. */
function headerReader(headers: WebhookHeaders): (name: string) => string | undefined {
  if (isFetchHeaders(headers)) {
    return (name) => presentValue(headers.get(name));
  }
  const byLowercaseName = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const text = typeof value === 'string' ? value : value.join(', ');
    const key = name.toLowerCase();
    const previous = byLowercaseName.get(key);
    byLowercaseName.set(key, previous === undefined ? text : `${previous}, ${text}`);
  }
  return (name) => presentValue(byLowercaseName.get(name.toLowerCase()));
}

function isFetchHeaders(headers: WebhookHeaders): headers is { get(name: string): string | null } {
  return typeof headers.get === 'function';
}

function presentValue(value: string | null | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

/**
 * Extracts the well-formed v1 signatures (`v1=` and 64 lowercase hex) from a header holding one or
 * more space- or comma-separated `<version>=<value>` entries; other versions and malformed values
 * are ignored, so that one bad value does not hide a genuine one beside it.
 */
function parseSignatureHeader(header: string): string[] {
  const v1Prefix = `${SIGNATURE_VERSION}=`;
  const v1Signatures = header
    .split(/[\s,]+/)
    .filter((entry) => entry.startsWith(v1Prefix) && V1_SIGNATURE_PATTERN.test(entry.slice(v1Prefix.length)));
  if (v1Signatures.length === 0) {
    throw new WebhookVerificationError(
      'malformed_signature',
      `${SIGNATURE_HEADERS.signature} holds no ${v1Prefix}<64 lowercase hex> value`,
    );
  }
  return v1Signatures;
}

function parseTimestamp(header: string): number {
  const seconds = TIMESTAMP_PATTERN.test(header) ? Number(header) : Number.NaN;
  if (!Number.isSafeInteger(seconds)) {
    throw new WebhookVerificationError(
      'malformed_timestamp',
      `${SIGNATURE_HEADERS.timestamp} must be a Unix time in whole seconds, got ${JSON.stringify(header.slice(0, 32))}`,
    );
  }
  return seconds;
}

function parsePayload(rawBody: string | Uint8Array): WebhookPayload {
  let payload: unknown;
  try {
    const text = typeof rawBody === 'string' ? rawBody : new TextDecoder('utf-8', { fatal: true }).decode(rawBody);
    payload = JSON.parse(text);
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'Body is not UTF-8 JSON');
  }
  if (!isWebhookPayload(payload)) {
    throw new WebhookVerificationError(
      'invalid_payload',
      'Body must be an object with string id, event, timestamp and api_version, and an object data',
    );
  }
  return payload;
}

function isWebhookPayload(value: unknown): value is WebhookPayload {
  return (
    isPlainObject(value) &&
    typeof value['id'] === 'string' &&
    typeof value['event'] === 'string' &&
    typeof value['timestamp'] === 'string' &&
    typeof value['api_version'] === 'string' &&
    isPlainObject(value['data'])
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
