import { createRoute, z } from '@hono/zod-openapi';
import { findActiveApiKey } from '../../db/queries/api-keys.ts';
import { deleteWebhook, insertWebhookWithinLimit, listWebhooks, rotateWebhookSecret, updateWebhook } from '../../db/queries/webhooks.ts';
import { generateWebhookSecret } from '../../secrets/crypto.ts';
import { openWebhookHeaders } from '../../db/sealing.ts';
import { ownedWebhook } from '../auth.ts';
import { ApiError } from '../errors.ts';
import { webhookListItem, webhookResource } from '../presenters.ts';
import {
  CreateWebhookSchema,
  IdParamsSchema,
  ListMetaSchema,
  RotatedSecretSchema,
  RotateSecretSchema,
  UpdateWebhookSchema,
  WebhookListQuerySchema,
  WebhookListItemSchema,
  WebhookSchema,
  WebhookWithSecretSchema,
  envelope,
} from '../schemas.ts';
import { requireApiKey } from '../auth.ts';
import { createRouter } from '../validation.ts';
import { deliveriesRouter } from './deliveries.ts';
import { operationsRouter } from './operations.ts';
import { testEventsRouter } from './test-events.ts';
import { emptyBodyIsNoBody, errorResponses, jsonBody, optionalJsonBody, success, webhookLinks } from './shared.ts';

const tags = ['Webhooks'];

/**
 * The webhooks resource, mounted at `/webhooks` of the v2 API with its sub-resources (test events,
 * deliveries, bulk retries): every route behind a customer API key, checked before anything else,
 * so an unknown path or method there is a 401 to a caller without one.
 */
export const webhooksRouter = createRouter();
webhooksRouter.use('/', requireApiKey);
webhooksRouter.use('/*', requireApiKey);
webhooksRouter
  .openapi(
    createRoute({
      method: 'post',
      path: '/',
      operationId: 'createWebhook',
      tags,
      summary: 'Create a webhook (the secret is returned only here)',
      request: { body: jsonBody(CreateWebhookSchema) },
      responses: {
        201: success(envelope(WebhookWithSecretSchema), 'The webhook, with its signing secret shown once', webhookLinks('$response.body#/data/id')),
        ...errorResponses(400, 401, 403, 409),
      },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const { db, secretBox } = c.var.deps;
      const projectId = c.var.apiKey.projectId;
      if (!(await findActiveApiKey(db, projectId, body.api_key_id))) {
        throw new ApiError('invalid_request', 'api_key_id: must be an active API key of your project');
      }
      const secret = generateWebhookSecret();
      const headers = body.headers ?? {};
      const created = await insertWebhookWithinLimit(
        db,
        secretBox,
        projectId,
        { apiKeyId: body.api_key_id, url: body.url, events: body.events, headers, rateLimit: body.rate_limit, standardWebhooks: body.standard_webhooks, secret },
        c.var.deps.admission.maxWebhooks,
      );
      if ('limit' in created) {
        throw new ApiError('conflict', `project ${projectId} has ${created.limit} webhooks, its limit: delete one before creating another`);
      }
      const row = created.webhook;
      c.var.logger.info({ webhookId: row.id }, 'webhook created');
      return c.json(
        {
          data: { ...webhookResource(row, headers), secret },
          message: 'Webhook created. Store the secret now: it is shown only once.',
          meta: { request_id: c.var.requestId },
        },
        201,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'get',
      path: '/',
      operationId: 'listWebhooks',
      tags,
      summary: "List the project's webhooks, oldest first (cursor pagination)",
      request: { query: WebhookListQuerySchema },
      responses: {
        // No links: a page may be empty, and a link to its first item would not resolve. The create response links them all.
        200: success(envelope(z.array(WebhookListItemSchema), ListMetaSchema), 'A page of the webhooks of the project, oldest first'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const query = c.req.valid('query');
      const page = await listWebhooks(c.var.deps.db, c.var.apiKey.projectId, { limit: query.limit, startingAfter: query.starting_after });
      const last = page.rows.at(-1);
      return c.json(
        {
          data: page.rows.map(webhookListItem),
          message: `${page.rows.length} webhook${page.rows.length === 1 ? '' : 's'}`,
          meta: { request_id: c.var.requestId, has_more: page.hasMore, ...(page.hasMore && last ? { next_cursor: last.id } : {}) },
        },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'get',
      path: '/{id}',
      operationId: 'getWebhook',
      tags,
      summary: 'Get a webhook (without its secret)',
      request: { params: IdParamsSchema },
      responses: {
        200: success(envelope(WebhookSchema), 'The webhook'),
        ...errorResponses(401, 403, 404),
      },
    }),
    async (c) => {
      const webhook = await ownedWebhook(c, c.req.valid('param').id);
      return c.json(
        {
          data: webhookResource(webhook, openWebhookHeaders(c.var.deps.secretBox, webhook)),
          message: 'Webhook retrieved',
          meta: { request_id: c.var.requestId },
        },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'patch',
      path: '/{id}',
      operationId: 'updateWebhook',
      tags,
      summary: 'Update a webhook: url, events, status, headers, rate_limit, standard_webhooks',
      request: { params: IdParamsSchema, body: jsonBody(UpdateWebhookSchema) },
      responses: {
        200: success(envelope(WebhookSchema), 'The updated webhook'),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const owned = await ownedWebhook(c, id);
      const { rate_limit: rateLimit, standard_webhooks: standardWebhooks, ...body } = c.req.valid('json');
      const { secretBox } = c.var.deps;
      // Every field is optional (spec 4.2): with none, nothing is written.
      if (Object.keys(c.req.valid('json')).length === 0) {
        return c.json({ data: webhookResource(owned, openWebhookHeaders(secretBox, owned)), message: 'Webhook updated', meta: { request_id: c.var.requestId } }, 200);
      }
      const updated = await updateWebhook(c.var.deps.db, secretBox, id, {
        ...body,
        ...(rateLimit !== undefined && { rateLimit }),
        ...(standardWebhooks !== undefined && { standardWebhooks }),
      });
      if (!updated) throw new ApiError('not_found', `webhook ${id} not found`);
      const { row, startsBroughtForward } = updated;
      // Sends waiting for a start the new rate limit brought forward; one not woken here still
      // sends, at its old start.
      await c.var.deps.scheduler.wakeForTurn(startsBroughtForward).catch((error: unknown) => {
        c.var.logger.warn({ err: error, count: startsBroughtForward.length }, 'could not wake the sends the new rate limit brought forward');
      });
      c.var.logger.info({ fields: Object.keys(c.req.valid('json')) }, 'webhook updated');
      return c.json(
        { data: webhookResource(row, openWebhookHeaders(secretBox, row)), message: 'Webhook updated', meta: { request_id: c.var.requestId } },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'delete',
      path: '/{id}',
      operationId: 'deleteWebhook',
      tags,
      summary: 'Delete a webhook, its deliveries and their pending attempts',
      request: { params: IdParamsSchema },
      responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      await ownedWebhook(c, id);
      let cancelled = 0;
      // Each statement's open deliveries as it commits, also of a delete that fails later or that
      // another delete of the webhook ends first: their records are gone, and a workflow not
      // cancelled would find nothing to send, but one parked in dead_letter would wait out its days.
      const deleted = await deleteWebhook(c.var.deps.db, id, async (notDelivered) => {
        if (notDelivered.length === 0) return;
        await c.var.deps.scheduler.cancel(notDelivered).then(
          () => void (cancelled += notDelivered.length),
          (error: unknown) => c.var.logger.warn({ err: error, count: notDelivered.length }, 'could not cancel delivery workflows'),
        );
      });
      if (!deleted) throw new ApiError('not_found', `webhook ${id} not found`);
      c.var.logger.info({ cancelled }, 'webhook deleted');
      return c.body(null, 204);
    },
  )
  .openapi(
    createRoute({
      method: 'post',
      path: '/{id}/rotate-secret',
      operationId: 'rotateWebhookSecret',
      tags,
      summary: 'Replace the signing secret (the new one is returned only here), optionally keeping the old one valid for a grace period',
      middleware: [emptyBodyIsNoBody],
      request: { params: IdParamsSchema, body: optionalJsonBody(RotateSecretSchema) },
      responses: {
        200: success(envelope(RotatedSecretSchema), 'The new secret, shown once'),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const gracePeriodSeconds = c.req.valid('json')?.grace_period;
      await ownedWebhook(c, id);
      const secret = generateWebhookSecret();
      const row = await rotateWebhookSecret(c.var.deps.db, c.var.deps.secretBox, id, { secret, gracePeriodSeconds, at: new Date() });
      if (!row) throw new ApiError('not_found', `webhook ${id} not found`);
      const previousExpiresAt = row.previousSecretExpiresAt?.toISOString();
      c.var.logger.info({ gracePeriodSeconds: gracePeriodSeconds ?? 0 }, 'webhook secret rotated');
      return c.json(
        {
          data: { id, secret, ...(previousExpiresAt && { previous_secret_expires_at: previousExpiresAt }) },
          message: previousExpiresAt
            ? `Secret rotated. Store the new secret now: it is shown only once. Until ${previousExpiresAt} each send is signed with the new and the previous secret, then with the new one alone.`
            : 'Secret rotated. Store the new secret now: it is shown only once and signs every send from now on.',
          meta: { request_id: c.var.requestId },
        },
        200,
      );
    },
  );
webhooksRouter.route('/', testEventsRouter).route('/', deliveriesRouter).route('/', operationsRouter);
