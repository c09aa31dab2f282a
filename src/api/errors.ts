import type { ContentfulStatusCode } from 'hono/utils/http-status';

/**
 * The v2 error codes (spec 7.2) this service returns, plus two of its own: `method_not_allowed`
 * for 405 and `rate_limited` for 429 (the spec's catalogue has no rate-limit code).
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  bad_request: 400,
  invalid_api_key: 401,
  invalid_token: 401,
  unauthorized: 401,
  service_not_enabled: 403,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  unprocessable_entity: 422,
  rate_limited: 429,
  internal_error: 500,
  internal_server_error: 500,
  service_unavailable: 503,
} as const satisfies Record<string, ContentfulStatusCode>;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** An error that becomes a v2 error body with the catalog's HTTP status. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: ContentfulStatusCode;
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.code = code;
    this.headers = headers;
    this.status = ERROR_STATUS[code];
  }
}

/** The v2 error body (spec 7.1). */
export interface ErrorBody {
  error: { code: ErrorCode; message: string };
  meta: { request_id: string };
}

export const errorBody = (code: ErrorCode, message: string, requestId: string): ErrorBody => ({
  error: { code, message },
  meta: { request_id: requestId },
});

/**
 * How long the answer to a refused publish is held back, about a second: a producer that
 * publishes again at once, ignoring Retry-After, is slowed to about one refusal a second per
 * connection instead of keeping the API busy answering refusals (a producer that follows
 * Retry-After waits that long anyway). The pause is spread from half a second to one and a half,
 * so that a producer's many connections do not come back all at once.
 */
const refusalPauseMs = () => 500 + Math.random() * 1_000;

/**
 * The 429 of an event refused by its project's publish quota, given after a pause of about a
 * second, with when to try again from then. Nothing of the event has been read or stored.
 */
export async function rateLimited(projectId: string, retryAfterMs: number): Promise<ApiError> {
  const pause = refusalPauseMs();
  await new Promise((resolve) => setTimeout(resolve, pause));
  const seconds = Math.max(1, Math.ceil((retryAfterMs - pause) / 1000));
  return new ApiError(
    'rate_limited',
    `project ${projectId} is publishing faster than its quota allows; nothing was stored: try again in ${seconds} s`,
    { 'Retry-After': String(seconds) },
  );
}
