import { createMiddleware } from 'hono/factory';
import { authenticateToken, EVENTS_SERVICE, WEBHOOKS_SERVICE } from '../db/queries/api-keys.ts';
import { findWebhook } from '../db/queries/webhooks.ts';
import type { ApiKeyRow, WebhookRow } from '../db/schema.ts';
import type { Context } from 'hono';
import type { AppEnv } from './env.ts';
import { ApiError, rateLimited } from './errors.ts';
import { isLookupId } from '../ids.ts';
import { constantTimeEqual } from '../secrets/crypto.ts';

function bearerToken(header: string | undefined): string {
  if (!header) throw new ApiError('invalid_api_key', 'missing Authorization header');
  // The scheme name is case-insensitive (RFC 9110 section 11.1).
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) throw new ApiError('invalid_api_key', 'Authorization header must be "Bearer <API_TOKEN>"');
  return match[1]!;
}

/** The active key of a bearer token with `service` enabled; the v2 error otherwise. */
function requireService(key: ApiKeyRow | undefined, service: string): ApiKeyRow {
  if (!key || key.revokedAt) throw new ApiError('invalid_api_key', 'API key is unknown or revoked');
  if (key.services.length === 0) throw new ApiError('invalid_api_key', 'API key has no services enabled');
  if (!key.services.includes(service)) {
    throw new ApiError('service_not_enabled', `the ${service} service is not enabled on this API key`);
  }
  return key;
}

/**
 * Spec section 5: a valid, active API key with the `webhooks` service enabled. A portal
 * session's in-process call brings its key along instead of a token; the same checks apply.
 */
export const requireApiKey = createMiddleware<AppEnv>(async (c, next) => {
  const key = requireService(
    c.env?.portalApiKey ?? (await authenticateToken(c.var.deps.db, bearerToken(c.req.header('Authorization')))),
    WEBHOOKS_SERVICE,
  );
  c.set('apiKey', key);
  c.set('logger', c.var.logger.child({ apiKeyId: key.id, projectId: key.projectId }));
  await next();
});

/**
 * The producers' door: a producer key (an API key with the `events` service), which publishes
 * for its own project only (`producerProjectId`), or the operator's EVENT_PRODUCER_TOKEN when
 * one is configured, compared in constant time, for every project.
 */
export const requireProducer = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearerToken(c.req.header('Authorization'));
  // A producer over its quota moments ago is refused again at once, before any lookup.
  const refused = c.var.quota.refusedCredential(token);
  if (refused) throw await rateLimited(refused.projectId, refused.retryAfterMs);
  c.set('producerToken', token);
  const operatorToken = c.var.deps.producerToken;
  if (operatorToken !== undefined && constantTimeEqual(token, operatorToken)) {
    c.set('producerProjectId', undefined);
  } else {
    const key = await authenticateToken(c.var.deps.db, token);
    if (!key) throw new ApiError('unauthorized', 'producer key rejected');
    requireService(key, EVENTS_SERVICE);
    c.set('producerProjectId', key.projectId);
    c.set('logger', c.var.logger.child({ apiKeyId: key.id, projectId: key.projectId }));
  }
  await next();
});

/** The webhook `id` of the caller's project: 404 when unknown, 403 when another project's. */
export async function ownedWebhook(c: Context<AppEnv>, id: string): Promise<WebhookRow> {
  const webhook = isLookupId(id) ? await findWebhook(c.var.deps.db, id) : undefined;
  if (!webhook) throw new ApiError('not_found', `webhook ${id} not found`);
  if (webhook.projectId !== c.var.apiKey.projectId) {
    throw new ApiError('forbidden', `webhook ${id} belongs to another project`);
  }
  c.set('logger', c.var.logger.child({ webhookId: id }));
  return webhook;
}
