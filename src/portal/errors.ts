import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ErrorCode } from '../api/errors.ts';

/** An error the portal shows as a page of its own: a title and what to do about it. */
export class PortalError extends Error {
  override name = 'PortalError';
  readonly status: ContentfulStatusCode;
  readonly detail: string;

  constructor(status: ContentfulStatusCode, title: string, detail: string) {
    super(title);
    this.status = status;
    this.detail = detail;
  }
}

/** A refusal of the API, as its v2 error body said it. */
export class ApiRefusal extends Error {
  override name = 'ApiRefusal';
  readonly status: number;
  readonly code: ErrorCode;
  /** The API's `Retry-After` (a refusal over a quota), passed on with the page. */
  readonly retryAfter: string | undefined;

  constructor(status: number, code: ErrorCode, message: string, retryAfter?: string) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}
