import { z } from '@hono/zod-openapi';
import { DELIVERY_STATUSES, OPERATION_STATUSES, RETRYABLE_DELIVERY_STATUSES } from '../db/schema.ts';
import { isReservedHeaderName, RESERVED_HEADER_NAMES, RESERVED_HEADER_PREFIX } from '../delivery/notification.ts';
import { EVENT_KINDS, isoTimestamp } from '../events/schema.ts';

const MAX_URL_LENGTH = 2048;
const MAX_CUSTOM_HEADERS = 20;
const MAX_CUSTOM_HEADER_BYTES = 8 * 1024;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** A pattern matching, in any letter case, the header names the service sets itself. */
const RESERVED_HEADER_PATTERN = (() => {
  // Letters as [Xx] (JSON Schema patterns have no flags); the names hold only letters and hyphens.
  const caseless = (text: string) => text.replace(/[a-z]/g, (letter) => `[${letter.toUpperCase()}${letter}]`);
  return `^(?:${[...RESERVED_HEADER_NAMES].map(caseless).join('|')}|${caseless(RESERVED_HEADER_PREFIX)}.*)$`;
})();

// The grammar of a webhook URL, shared by the server's check and the document's `pattern` so the two
// accept the same strings: an https URI (RFC 3986) of ASCII characters whose host is a DNS name (its
// last label starting with a letter, so it is not read as an IPv4 address), a dotted-decimal IPv4
// address or an [IPv6] literal, an optional port up to 65535, then path, query and fragment, anything
// else percent-encoded. Every such string is also a URL Node's parser accepts (which a looser
// grammar cannot promise: `https://1.2.3.999`, `https://a:70000` or `https://[v1.x]` are URIs it
// refuses), save a label starting `xn--` that is not valid Punycode.
const DEC_OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const IPV4 = `(?:${DEC_OCTET}\\.){3}${DEC_OCTET}`;
const H16 = '[0-9A-Fa-f]{1,4}';
const LS32 = `(?:${H16}:${H16}|${IPV4})`;
const IPV6 = [
  `(?:${H16}:){6}${LS32}`,
  `::(?:${H16}:){5}${LS32}`,
  `(?:${H16})?::(?:${H16}:){4}${LS32}`,
  `(?:(?:${H16}:){0,1}${H16})?::(?:${H16}:){3}${LS32}`,
  `(?:(?:${H16}:){0,2}${H16})?::(?:${H16}:){2}${LS32}`,
  `(?:(?:${H16}:){0,3}${H16})?::${H16}:${LS32}`,
  `(?:(?:${H16}:){0,4}${H16})?::${LS32}`,
  `(?:(?:${H16}:){0,5}${H16})?::${H16}`,
  `(?:(?:${H16}:){0,6}${H16})?::`,
].join('|');
const DNS_NAME = '(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\\.)*[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?\\.?';
const PORT = '[0-9]{0,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]';
const PCHAR = "[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2}";
const WEBHOOK_URL_PATTERN =
  `^https://(?:${DNS_NAME}|${IPV4}|\\[(?:${IPV6})\\])(?::(?:${PORT}))?` +
  `(?:/(?:${PCHAR}|/)*)?(?:\\?(?:${PCHAR}|[/?])*)?(?:#(?:${PCHAR}|[/?])*)?$`;
const WEBHOOK_URL = new RegExp(WEBHOOK_URL_PATTERN);

/** An absolute https URL without user-info (spec 4.3 rule 1), in the grammar above. */
export const WebhookUrlSchema = z
  .string()
  .max(MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`)
  .superRefine((value, ctx) => {
    if (/[\u0000-\u0020\u007f]/.test(value) || !value.isWellFormed()) {
      ctx.addIssue({ code: 'custom', message: 'must not contain spaces or control characters' });
      return;
    }
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an absolute URL' });
      return;
    }
    if (url.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: 'must use https' });
    else if (url.username || url.password) ctx.addIssue({ code: 'custom', message: 'must not contain user-info' });
    else if (!url.hostname) ctx.addIssue({ code: 'custom', message: 'must name a host' });
    else if (!WEBHOOK_URL.test(value)) {
      ctx.addIssue({
        code: 'custom',
        message: 'must be an https URI in ASCII: a DNS name, IPv4 or [IPv6] address as host, other characters percent-encoded',
      });
    }
  })
  .openapi({
    example: 'https://example.com/webhooks',
    description:
      'HTTPS endpoint receiving events: an absolute https URI of ASCII characters, without user-info; the host a DNS name ' +
      '(an internationalized one in its xn-- Punycode form), an IPv4 address or an [IPv6] address; other characters ' +
      'percent-encoded',
    format: 'uri',
    pattern: WEBHOOK_URL_PATTERN,
  });

export const EventListSchema = z
  .array(z.enum(EVENT_KINDS, { message: `must be one of: ${EVENT_KINDS.join(', ')}` }))
  .min(1, 'must list at least one event')
  .refine((events) => new Set(events).size === events.length, 'must not repeat an event')
  .openapi({ example: ['docauth.completed'], uniqueItems: true });

/** Custom headers: valid names and values, none the service sets itself, bounded in count and size. */
export const CustomHeadersSchema = z
  .record(z.string(), z.string({ message: 'header values must be strings' }))
  .superRefine((headers, ctx) => {
    const names = Object.keys(headers);
    if (names.length > MAX_CUSTOM_HEADERS) {
      ctx.addIssue({ code: 'custom', message: `must have at most ${MAX_CUSTOM_HEADERS} headers` });
    }
    const seen = new Set<string>();
    let bytes = 0;
    for (const [name, value] of Object.entries(headers)) {
      bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
      if (!HEADER_NAME.test(name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'is not a valid header name' });
      } else if (isReservedHeaderName(name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'is set by the service and cannot be overridden' });
      } else if (seen.has(name.toLowerCase())) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'repeats a header name (names are case-insensitive)' });
      }
      seen.add(name.toLowerCase());
      if (!HEADER_VALUE.test(value)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'value contains a control character' });
      }
    }
    if (bytes > MAX_CUSTOM_HEADER_BYTES) {
      ctx.addIssue({ code: 'custom', message: `must total at most ${MAX_CUSTOM_HEADER_BYTES} bytes` });
    }
  })
  // `propertyNames` is JSON Schema (OpenAPI 3.1) that the metadata type does not list.
  .openapi({
    example: { 'X-Customer-Tag': 'prod' },
    maxProperties: MAX_CUSTOM_HEADERS,
    propertyNames: { pattern: HEADER_NAME.source, not: { pattern: RESERVED_HEADER_PATTERN } },
    additionalProperties: { type: 'string', pattern: HEADER_VALUE.source },
    description:
      `At most ${MAX_CUSTOM_HEADERS} headers and ${MAX_CUSTOM_HEADER_BYTES} bytes of names and values; names are case-insensitive ` +
      'and must not repeat; none of Content-Type, Content-Length, Host, Transfer-Encoding, Connection, User-Agent, traceparent, ' +
      'webhook-id, webhook-timestamp, webhook-signature or X-Service-*',
  } as Record<string, unknown>);

/** The most deliveries per second a webhook's `rate_limit` may allow. */
export const MAX_RATE_LIMIT = 1000;

/**
 * The fewest deliveries per second a webhook's `rate_limit` may allow: one every 100 s. Each send
 * waiting for its start under the limit keeps its places until then, so the slowest limit bounds
 * how far ahead the schedule reaches (ENDPOINT_MAX_IN_FLIGHT starts, at most about 28 hours at
 * the largest setting) and keeps it a time the workflow's timer can represent.
 */
export const MIN_RATE_LIMIT = 0.01;

/** A webhook's rate limit: deliveries per second, from {@link MIN_RATE_LIMIT} to {@link MAX_RATE_LIMIT}. */
const RateLimitSchema = z
  .number({ message: 'must be a number of deliveries per second' })
  .min(MIN_RATE_LIMIT, `must be at least ${MIN_RATE_LIMIT} deliveries per second (one every ${1 / MIN_RATE_LIMIT} s)`)
  .max(MAX_RATE_LIMIT, `must be at most ${MAX_RATE_LIMIT} deliveries per second`)
  .openapi({
    description:
      `Deliveries per second at most to this endpoint, from ${MIN_RATE_LIMIT} (one every ${1 / MIN_RATE_LIMIT} s) to ${MAX_RATE_LIMIT} ` +
      '(fractions allowed: 0.5 is one every 2 s); absent: no limit. ' +
      'Deliveries beyond it wait their turn; waiting uses up none of the 5 attempts. A new limit applies at once, ' +
      'to the deliveries already waiting as well.',
    example: 5,
  });

const StandardWebhooksSchema = z.boolean({ message: 'must be true or false' }).openapi({
  description:
    'Also sign each send the Standard Webhooks way (headers webhook-id, the delivery id, webhook-timestamp and webhook-signature), ' +
    'beside the X-Service-* headers, so receivers can verify with a Standard Webhooks library; see docs/receivers.md',
});

export const CreateWebhookSchema = z
  .strictObject({
    api_key_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be an API key id'),
    url: WebhookUrlSchema,
    events: EventListSchema,
    headers: CustomHeadersSchema.optional(),
    rate_limit: RateLimitSchema.optional(),
    standard_webhooks: StandardWebhooksSchema.optional().openapi({ description: 'Default false' }),
  })
  .openapi('CreateWebhook');

export const UpdateWebhookSchema = z
  .strictObject({
    url: WebhookUrlSchema.optional(),
    events: EventListSchema.optional(),
    status: z.enum(['active', 'disabled'], { message: 'must be active or disabled' }).optional(),
    headers: CustomHeadersSchema.optional(),
    rate_limit: RateLimitSchema.nullable().optional().openapi({ description: 'A new limit, or null to remove it' }),
    standard_webhooks: StandardWebhooksSchema.optional(),
  })
  .openapi('UpdateWebhook', { description: 'Every field optional; an empty body changes nothing and answers the webhook as it is' });

const timestamp = z.string().openapi({ format: 'date-time', example: '2026-11-22T10:00:00.000Z' });

export const RetryConfigSchema = z
  .object({
    max_retries: z.number().int(),
    initial_delay: z.number().int().openapi({ description: 'seconds' }),
    max_delay: z.number().int().openapi({ description: 'seconds' }),
    backoff_multiplier: z.number().int(),
  })
  .openapi('RetryConfig');

const webhookFields = {
  id: z.string().openapi({ example: 'wh_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
  api_key_id: z.string(),
  project_id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  status: z.enum(['active', 'disabled']),
  success_count: z.number().int(),
  failure_count: z.number().int(),
  last_delivered_at: timestamp.optional(),
  disabled_reason: z
    .string()
    .optional()
    .openapi({ description: 'Set when the service disabled the webhook because every attempt failed for too long; cleared by PATCH status=active' }),
  disabled_at: timestamp.optional().openapi({ description: 'When the service disabled it' }),
  rate_limit: z.number().optional().openapi({ description: 'Deliveries per second at most; absent: no limit' }),
  circuit_state: z.enum(['closed', 'open']).openapi({
    description:
      'The endpoint\'s circuit breaker: `open` after CIRCUIT_BREAKER_THRESHOLD attempts in a row failed (the service then sends ' +
      'one attempt at a time, a probe, and the other deliveries wait without using attempts), `closed` again after a success',
  }),
  circuit_opened_at: timestamp.optional().openapi({ description: 'When the circuit breaker opened; present while it is open' }),
  consecutive_failures: z.number().int().openapi({ description: 'Failed attempts in a row since the last success' }),
  standard_webhooks: z.boolean().openapi({ description: 'Sends also carry the Standard Webhooks headers and signature' }),
  previous_secret_expires_at: timestamp.optional().openapi({
    description: 'Present during the grace period of a secret rotation: until then each send is signed with the new and the previous secret',
  }),
  created_at: timestamp,
  updated_at: timestamp,
};

/** List variant (spec 2.1): no `headers`, no `retry_config`. */
export const WebhookListItemSchema = z.strictObject(webhookFields).openapi('WebhookListItem');

/** Get, update: the whole configuration without the secret. */
export const WebhookSchema = z
  .strictObject({
    ...webhookFields,
    headers: z.record(z.string(), z.string()),
    retry_config: RetryConfigSchema,
  })
  .openapi('Webhook');

/** Create: the whole configuration and, this once, the secret. */
export const WebhookWithSecretSchema = z
  .strictObject({ ...WebhookSchema.shape, secret: z.string() })
  .openapi('WebhookWithSecret');

/** The longest grace period of a rotation, in seconds (7 days). */
export const MAX_GRACE_PERIOD_SECONDS = 7 * 24 * 60 * 60;

/** The optional body of a secret rotation. */
export const RotateSecretSchema = z
  .strictObject({
    grace_period: z
      .number({ message: 'must be a number of seconds' })
      .int('must be a whole number of seconds')
      .min(0, 'must be at least 0 seconds')
      .max(MAX_GRACE_PERIOD_SECONDS, `must be at most ${MAX_GRACE_PERIOD_SECONDS} seconds (7 days)`)
      .openapi({
        description:
          'Seconds during which the replaced secret keeps signing, beside the new one: each send then carries two space-separated ' +
          '`v1=` signatures in X-Service-Signature, the new one first. 0 or absent: the new secret alone signs every send at once. ' +
          'A rotation ends any earlier grace period: at most two secrets sign a send.',
        example: 86400,
      }),
  })
  .partial()
  .openapi('RotateSecret', { example: { grace_period: 86400 } });

export const RotatedSecretSchema = z
  .strictObject({
    id: z.string(),
    secret: z.string(),
    previous_secret_expires_at: timestamp.optional().openapi({ description: 'Until when the replaced secret also signs; absent without a grace period' }),
  })
  .openapi('RotatedSecret');

export const DeliverySchema = z
  .strictObject({
    id: z.string().openapi({ example: 'dlv_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
    webhook_config_id: z.string(),
    event: z.string(),
    status: z.enum(DELIVERY_STATUSES),
    attempt_count: z.number().int(),
    created_at: timestamp,
    delivered_at: timestamp.optional(),
    last_error: z.string().optional(),
    last_status_code: z.number().int().optional(),
    next_retry_at: timestamp.optional(),
  })
  .openapi('Delivery');

export const DeliveryAttemptSchema = z
  .strictObject({
    id: z.string(),
    delivery_id: z.string(),
    attempt_number: z.number().int(),
    started_at: timestamp,
    duration_ms: z.number().int().optional(),
    status_code: z.number().int().optional(),
    outcome: z.enum(['in_progress', 'succeeded', 'http_error', 'timeout', 'network_error', 'refused']),
    error: z.string().optional(),
  })
  .openapi('DeliveryAttempt');

/** A list's page size: a whole number from 1 to 100, `fallback` when absent. */
const pageLimit = (fallback: number) =>
  z
    .preprocess(
      // Only plain decimal text becomes a number: '0x10', '1e1' or ' 1' stay text and are refused.
      (value) => (typeof value === 'string' && /^-?\d*(\.\d+)?$/.test(value) ? Number(value) : value),
      z
        .number({ message: 'must be a number' })
        .int('must be a whole number')
        .min(1, 'must be at least 1')
        .max(100, 'must be at most 100'),
    )
    .default(fallback)
    .openapi({ type: 'integer', minimum: 1, maximum: 100, default: fallback });

export const WebhookListQuerySchema = z.object({
  limit: pageLimit(100),
  starting_after: z
    .string()
    .regex(/^wh_[0-9a-hjkmnp-tv-z]{26}$/, 'must be a webhook id')
    .optional(),
});

export const DeliveryListQuerySchema = z.object({
  limit: pageLimit(50),
  starting_after: z
    .string()
    .regex(/^dlv_[0-9a-hjkmnp-tv-z]{26}$/, 'must be a delivery id')
    .optional(),
  status: z.enum(DELIVERY_STATUSES, { message: `must be one of: ${DELIVERY_STATUSES.join(', ')}` }).optional(),
  event: z.enum(EVENT_KINDS, { message: `must be one of: ${EVENT_KINDS.join(', ')}` }).optional(),
});

export const IdParamsSchema = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' }, example: 'wh_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
});

export const DeliveryParamsSchema = IdParamsSchema.extend({
  delivery_id: z
    .string()
    .openapi({ param: { name: 'delivery_id', in: 'path' }, example: 'dlv_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
});

export const OperationParamsSchema = IdParamsSchema.extend({
  operation_id: z
    .string()
    .openapi({ param: { name: 'operation_id', in: 'path' }, example: 'op_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
});

export const BulkRetryBodySchema = z
  .strictObject({
    status: z
      .array(z.enum(RETRYABLE_DELIVERY_STATUSES, { message: `must be one of: ${RETRYABLE_DELIVERY_STATUSES.join(', ')}` }))
      .min(1, 'must list at least one status')
      .refine((statuses) => new Set(statuses).size === statuses.length, 'must not repeat a status')
      .optional()
      .openapi({ description: 'Statuses of the deliveries to retry; default `["dead_letter"]`', uniqueItems: true, example: ['dead_letter'] }),
    since: isoTimestamp.optional().openapi({ description: 'Deliveries created at or after this instant; must be before `until` and before now', example: '2026-11-22T10:00:00Z' }),
    until: isoTimestamp.optional().openapi({ description: 'Deliveries created before this instant (default and at most: now)' }),
  })
  // `until` is at most now, so a `since` from now on would match nothing: refused, not run empty.
  .refine((body) => !body.since || Date.parse(body.since) < Math.min(body.until ? Date.parse(body.until) : Infinity, Date.now()), {
    message: 'must be before until, and before now',
    path: ['since'],
  })
  .openapi('BulkRetryRequest');

export const OperationStatusSchema = z.enum(OPERATION_STATUSES);

export const OperationStartedSchema = z
  .strictObject({
    id: z.string().openapi({ example: 'op_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
    status: OperationStatusSchema,
    matched: z.number().int().openapi({ description: 'Deliveries matched so far: 0 at the start, since the operation selects them in pages as it goes' }),
  })
  .openapi('OperationStarted');

export const OperationSchema = z
  .strictObject({
    id: z.string().openapi({ example: 'op_01jd3k6v8x0f5r7k2m9q4t1w3y' }),
    status: OperationStatusSchema,
    matched: z.number().int().openapi({ description: 'Deliveries the operation has matched so far (it selects them in pages as it goes; final once it is completed)' }),
    retried: z.number().int().openapi({ description: 'Matched deliveries queued and signalled so far' }),
    skipped: z.number().int().openapi({ description: 'Matched deliveries that had moved on by themselves when reached' }),
  })
  .openapi('Operation');

export const MetaSchema = z.object({ request_id: z.string() }).openapi('Meta');
export const ListMetaSchema = MetaSchema.extend({
  has_more: z.boolean(),
  next_cursor: z.string().optional(),
}).openapi('ListMeta');

export const ErrorSchema = z
  .object({
    error: z.object({ code: z.string(), message: z.string() }),
    meta: MetaSchema,
  })
  .openapi('Error');

/** The success envelope (spec 2.3). */
export const envelope = <T extends z.ZodType>(data: T, meta: z.ZodType = MetaSchema) =>
  z.object({ data, message: z.string(), meta });
