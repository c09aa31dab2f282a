import type { z } from '@hono/zod-openapi';
import { createMiddleware } from 'hono/factory';
import type { AppEnv } from '../env.ts';
import { ErrorSchema } from '../schemas.ts';

/** What a 202 adds when the event is stored but Temporal did not answer: the repair check starts its workflows. */
export const STARTS_LATER = "Temporal did not answer, so the service's repair check starts its delivery shortly (publishing again is not needed)";

/**
 * OpenAPI security schemes: `apiKey` (a customer API token, every v2 operation) and
 * `producerToken` (a producer key, or the operator's EVENT_PRODUCER_TOKEN: the producers' door).
 * Both are bearer tokens.
 */
export const SECURITY_SCHEMES = { apiKey: 'bearerAuth', producerToken: 'producerToken' } as const;

/** A required JSON request body. */
export const jsonBody = <T extends z.ZodType>(schema: T) => ({
  required: true,
  content: { 'application/json': { schema } },
});

/** An optional JSON request body: absent, the handler sees no field set. Its route takes {@link emptyBodyIsNoBody} too. */
export const optionalJsonBody = <T extends z.ZodType>(schema: T) => ({
  required: false,
  content: { 'application/json': { schema } },
});

/**
 * For a route whose JSON body is optional: an empty body sent with `Content-Type:
 * application/json` (many clients set it on every request) is read as no body (an empty object,
 * every field unset), not refused as malformed JSON. Hono's body readers parse the text it keeps.
 */
export const emptyBodyIsNoBody = createMiddleware<AppEnv>(async (c, next) => {
  // Hono keeps the promise of each reading of the body there (its type names the value).
  if (c.req.header('Content-Type') !== undefined && (await c.req.text()).trim() === '') (c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve('{}');
  await next();
});

/** The parameters of a linked operation, as OpenAPI runtime expressions (`$response.body#/data/id`). */
export type LinkParameters = Record<string, string>;

/**
 * A JSON success response; `links` name, by operationId, the operations that take ids from it
 * (so clients and generated tests can walk create -> get/update/delete).
 */
export const success = <T extends z.ZodType>(schema: T, description: string, links?: Record<string, LinkParameters>) => ({
  description,
  content: { 'application/json': { schema } },
  ...(links && {
    links: Object.fromEntries(
      Object.entries(links).map(([operationId, parameters]) => [
        operationId.charAt(0).toUpperCase() + operationId.slice(1),
        { operationId, parameters },
      ]),
    ),
  }),
});

/** Link parameters of the operations on one webhook, its id taken from `idExpression`. */
export const webhookLinks = (idExpression: string): Record<string, LinkParameters> =>
  Object.fromEntries(
    ['getWebhook', 'updateWebhook', 'deleteWebhook', 'rotateWebhookSecret', 'sendTestEvent', 'listDeliveries', 'retryDeliveries'].map((operationId) => [
      operationId,
      { id: idExpression },
    ]),
  );

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid_request: a field breaks a rule (the message names it)',
  401: 'invalid_api_key / unauthorized: missing, malformed, unknown or revoked credential',
  403: 'service_not_enabled / forbidden: the key lacks the service, or the resource is another project\'s',
  404: 'not_found: no such webhook or delivery',
  409: 'conflict: the delivery is not in a retryable status, the webhook is disabled (test events), a bulk retry of the webhook is running or the project is at its limit of bulk retries or webhooks (the message says which)',
  429: "rate_limited (an extension of the v2 catalogue): the project publishes faster than its quota; nothing was stored. Retry-After says when to try again",
  503: 'service_unavailable: a dependency is down; retry later',
};

/** v2 error responses for the given statuses, for the OpenAPI document. */
export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: ERROR_DESCRIPTIONS[status] ?? 'error',
        ...(status === 429 && {
          headers: { 'Retry-After': { description: 'Seconds to wait before publishing again', schema: { type: 'integer', minimum: 1 } } },
        }),
        content: { 'application/json': { schema: ErrorSchema } },
      },
    ]),
  );
