import type { z } from '@hono/zod-openapi';
import { ErrorSchema } from '../schemas.ts';

/**
 * OpenAPI security schemes: `apiKey` (a customer API token, every v2 operation) and
 * `producerToken` (EVENT_PRODUCER_TOKEN, the producers' door). Both are bearer tokens.
 */
export const SECURITY_SCHEMES = { apiKey: 'bearerAuth', producerToken: 'producerToken' } as const;

/** A required JSON request body. */
export const jsonBody = <T extends z.ZodType>(schema: T) => ({
  required: true,
  content: { 'application/json': { schema } },
});

/** A JSON success response. */
export const success = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid_request: a field breaks a rule (the message names it)',
  401: 'invalid_api_key / unauthorized: missing, malformed, unknown or revoked credential',
  403: 'service_not_enabled / forbidden: the key lacks the service, or the resource is another project\'s',
  404: 'not_found: no such webhook or delivery',
  409: 'conflict: the delivery is not in a retryable status',
  503: 'service_unavailable: a dependency is down; retry later',
};

/** v2 error responses for the given statuses, for the OpenAPI document. */
export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: ERROR_DESCRIPTIONS[status] ?? 'error', content: { 'application/json': { schema: ErrorSchema } } },
    ]),
  );
