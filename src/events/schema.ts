import { z } from '@hono/zod-openapi';

/** Event kinds a webhook can subscribe to (spec 6.1). */
export const EVENT_KINDS = ['docauth.completed'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** The instants a timestamp may name: years 0001 to 9999 in UTC, as PostgreSQL and `Date#toISOString` both write them. */
const TIMESTAMP_RANGE_MS = { min: Date.parse('0001-01-01T00:00:00Z'), max: Date.parse('9999-12-31T23:59:59.999Z') };

/** An ISO 8601 timestamp with a time zone (a value of the event's data, stored as the producer sent it). */
const isoDateTime = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 timestamp with a time zone' });

/**
 * An ISO 8601 timestamp with a time zone that the service stores as an instant: in years 0001
 * to 9999 once in UTC (`0000-01-01T00:00:00Z` and `9999-12-31T23:59:59-23:59` are well-formed,
 * but no column stores them).
 */
export const isoTimestamp = isoDateTime.refine((value) => {
  const ms = Date.parse(value);
  return ms >= TIMESTAMP_RANGE_MS.min && ms <= TIMESTAMP_RANGE_MS.max;
}, 'must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z');
const isoDate = z.iso.date({ message: 'must be a date (YYYY-MM-DD)' });
/**
 * Text Postgres can store: well-formed Unicode without NUL, of `min` to `max` characters counted
 * as JSON Schema counts them (code points, so an emoji is one, not two UTF-16 units as `.length`
 * counts it). The document states the bounds and the NUL rule, so what it promises is accepted.
 */
const text = (max = 1024, min = 0) =>
  z
    .string()
    .superRefine((value, ctx) => {
      if (!value.isWellFormed() || value.includes('\u0000')) {
        ctx.addIssue({ code: 'custom', message: 'must be valid Unicode text without NUL characters' });
        return;
      }
      const length = [...value].length;
      if (length < min) ctx.addIssue({ code: 'custom', message: `must be at least ${min} character${min === 1 ? '' : 's'}` });
      if (length > max) ctx.addIssue({ code: 'custom', message: `must be at most ${max} characters` });
    })
    .openapi({ ...(min > 0 && { minLength: min }), maxLength: max, pattern: '^[^\\u0000]*$' });

/** `docauth_info` (spec 6.2): every field seen in the payload, all optional strings. */
export const DocauthInfoSchema = z
  .strictObject({
    document_type: text(),
    country_code: text(),
    nationality_code: text(),
    nationality_name: text(),
    sex: text(),
    first_name: text(),
    father_name: text(),
    last_name: text(),
    expiry_date: isoDate,
    document_number: text(),
    birth_date: isoDate,
    current_result: text(),
  })
  .partial()
  .openapi('DocauthInfo');

/** The `data` object of a `docauth.completed` notification (spec 6.2). */
export const DocauthCompletedDataSchema = z
  .strictObject({
    request_id: text(256, 1),
    session_id: text(256, 1).optional(),
    result: z.enum(['pass', 'fail']),
    docauth_info: DocauthInfoSchema,
    processed_at: isoDateTime,
    scores_applied: z.boolean(),
  })
  .openapi('DocauthCompletedData');

/** Body of `POST /internal/v1/events` and input of `publishEvent()`. */
export const PublishEventSchema = z
  .strictObject({
    id: z
      .string()
      .regex(/^[A-Za-z0-9._:@-]{1,128}$/, 'must be 1-128 characters of A-Z a-z 0-9 . _ : @ -')
      .optional()
      .openapi({ description: "The producer's idempotency key: publishing the same id again returns the same deliveries." }),
    project_id: z.string().regex(/^[A-Za-z0-9._:@-]{1,128}$/, 'must be 1-128 characters of A-Z a-z 0-9 . _ : @ -'),
    event: z.enum(EVENT_KINDS),
    occurred_at: isoTimestamp.optional(),
    data: DocauthCompletedDataSchema,
  })
  .openapi('PublishEvent');

export type PublishEventInput = z.infer<typeof PublishEventSchema>;
