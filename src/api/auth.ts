import { createMiddleware } from 'hono/factory';
import { authenticateToken } from '../db/queries/api-keys.ts';
import { findWebhook } from '../db/queries/webhooks.ts';
import type { WebhookRow } from '../db/schema.ts';
import type { Context } from 'hono';
import type { AppEnv } from './env.ts';
import { ApiError } from './errors.ts';
import { isLookupId } from '../ids.ts';
import { constantTimeEqual } from '../secrets.ts';

/** The service an API key needs for the webhook management endpoints. */
export const WEBHOOKS_SERVICE = 'webhooks';

function bearerToken(header: string | undefined): string {
  if (!header) throw new ApiError('invalid_api_key', 'missing Authorization header');
  // The scheme name is case-insensitive (RFC 9110 section 11.1).
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) throw new ApiError('invalid_api_key', 'Authorization header must be "Bearer <API_TOKEN>"');
  return match[1]!;
}

/**
 * Spec section 5: a valid, active API key with the `webhooks` service enabled. A portal
 * session's in-process call brings its key along instead of a token; the same checks apply.
 */
export const requireApiKey = createMiddleware<AppEnv>(async (c, next) => {
  const key = c.env?.portalApiKey ?? (await authenticateToken(c.var.deps.db, bearerToken(c.req.header('Authorization'))));
  if (!key || key.revokedAt) throw new ApiError('invalid_api_key', 'API key is unknown or revoked');
  if (key.services.length === 0) throw new ApiError('invalid_api_key', 'API key has no services enabled');
  if (!key.services.includes(WEBHOOKS_SERVICE)) {
    throw new ApiError('service_not_enabled', `the ${WEBHOOKS_SERVICE} service is not enabled on this API key`);
  }
  c.set('apiKey', key);
  c.set('logger', c.var.logger.child({ apiKeyId: key.id, projectId: key.projectId }));
  await next();
});

/** The producer door's token (EVENT_PRODUCER_TOKEN), compared in constant time. */
export const requireProducerToken = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearerToken(c.req.header('Authorization'));
  if (!constantTimeEqual(token, c.var.deps.producerToken)) {
    throw new ApiError('unauthorized', 'producer token rejected');
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
