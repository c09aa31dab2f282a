import { randomBytes } from 'node:crypto';

/** The 32 digits of Crockford base32, in their order, that identifiers are written in. */
export const CROCKFORD_DIGITS = '0123456789abcdefghjkmnpqrstvwxyz';

/** Prefixes of the service's identifiers, one per resource. */
export const ID_PREFIX = {
  apiKey: 'key',
  webhook: 'wh',
  event: 'evt',
  delivery: 'dlv',
  attempt: 'att',
  operation: 'op',
  portalSession: 'ps',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

/**
 * A new opaque identifier such as `dlv_01jd3k…`: the prefix, then 26 characters of
 * Crockford base32 holding a 48-bit millisecond timestamp and 80 random bits
 * (the ULID layout), so identifiers of one kind sort by creation time.
 */
export function newId(kind: IdKind, now: number = Date.now()): string {
  const random = randomBytes(10);
  const timePart = timePartOf(now);
  let bits = BigInt(`0x${random.toString('hex')}`);
  let randomPart = '';
  for (let i = 0; i < 16; i += 1) {
    randomPart = CROCKFORD_DIGITS[Number(bits & 31n)] + randomPart;
    bits >>= 5n;
  }
  return `${ID_PREFIX[kind]}_${timePart}${randomPart}`;
}

/** The 10 characters of an identifier that hold its millisecond timestamp. */
function timePartOf(ms: number): string {
  let time = BigInt(ms);
  let timePart = '';
  for (let i = 0; i < 10; i += 1) {
    timePart = CROCKFORD_DIGITS[Number(time & 31n)] + timePart;
    time >>= 5n;
  }
  return timePart;
}

/** The part of every identifier of `kind` made at `ms` that comes before its 16 random digits: the prefix, `_` and the time part. */
export function idTimePrefix(kind: IdKind, ms: number): string {
  return `${ID_PREFIX[kind]}_${timePartOf(ms)}`;
}

/**
 * The smallest identifier of `kind` made at or after `ms` (every one made before sorts below it):
 * a time bound as an identifier, for a range of an index on ids.
 */
export function firstIdAt(kind: IdKind, ms: number): string {
  // No identifier is made before 1970 (its time part counts from the epoch): an earlier bound is the first of all.
  return `${idTimePrefix(kind, Math.max(0, ms))}${'0'.repeat(16)}`;
}

const LOOKUP_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Whether `value` can name a stored record at all: ids given by clients are checked with
 * this before any query, so bytes Postgres refuses (NUL, broken Unicode) never reach it.
 */
export function isLookupId(value: string): boolean {
  return LOOKUP_ID.test(value);
}

/** Whether `value` has the shape of an identifier of `kind`. */
export function isId(kind: IdKind, value: string): boolean {
  return new RegExp(`^${ID_PREFIX[kind]}_[0-9a-hjkmnp-tv-z]{26}$`).test(value);
}
