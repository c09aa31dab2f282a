import { createRoute, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import {
  findDelivery,
  listAttempts,
  listDeliveries,
  queueManualRetry,
  restoreRetryableState,
} from '../../db/queries/deliveries.ts';
import { isLookupId } from '../../ids.ts';
import { ownedWebhook } from '../auth.ts';
import type { AppEnv } from '../env.ts';
import { ApiError } from '../errors.ts';
import { attemptResource, deliveryResource } from '../presenters.ts';
import {
  DeliveryAttemptSchema,
  DeliveryListQuerySchema,
  DeliveryParamsSchema,
  DeliverySchema,
  IdParamsSchema,
  ListMetaSchema,
  envelope,
} from '../schemas.ts';
import { createRouter } from '../validation.ts';
import { errorResponses, success } from './shared.ts';

const tags = ['Deliveries'];

async function ownedDelivery(c: Context<AppEnv>, webhookId: string, deliveryId: string) {
  const webhook = await ownedWebhook(c, webhookId);
  const delivery = isLookupId(deliveryId) ? await findDelivery(c.var.deps.db, webhookId, deliveryId) : undefined;
  if (!delivery) throw new ApiError('not_found', `delivery ${deliveryId} not found for webhook ${webhookId}`);
  c.set('logger', c.var.logger.child({ deliveryId }));
  return { webhook, delivery };
}

/** Link parameters to the first delivery of a listed page. */
const FIRST_DELIVERY = { id: '$request.path.id', delivery_id: '$response.body#/data/0/id' };

export const deliveriesRouter = createRouter()
  .openapi(
    createRoute({
      method: 'get',
      path: '/{id}/deliveries',
      operationId: 'listDeliveries',
      tags,
      summary: 'List deliveries, newest first (cursor pagination, filters)',
      request: { params: IdParamsSchema, query: DeliveryListQuerySchema },
      responses: {
        200: success(envelope(z.array(DeliverySchema), ListMetaSchema), 'A page of deliveries', {
          getDelivery: FIRST_DELIVERY,
          listDeliveryAttempts: FIRST_DELIVERY,
          retryDelivery: FIRST_DELIVERY,
        }),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const query = c.req.valid('query');
      await ownedWebhook(c, id);
      const page = await listDeliveries(c.var.deps.db, id, {
        limit: query.limit,
        startingAfter: query.starting_after,
        status: query.status,
        event: query.event,
      });
      const last = page.rows.at(-1);
      return c.json(
        {
          data: page.rows.map(deliveryResource),
          message: `${page.rows.length} deliver${page.rows.length === 1 ? 'y' : 'ies'}`,
          meta: {
            request_id: c.var.requestId,
            has_more: page.hasMore,
            ...(page.hasMore && last ? { next_cursor: last.id } : {}),
          },
        },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'get',
      path: '/{id}/deliveries/{delivery_id}',
      operationId: 'getDelivery',
      tags,
      summary: 'Get one delivery',
      request: { params: DeliveryParamsSchema },
      responses: { 200: success(envelope(DeliverySchema), 'The delivery'), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { id, delivery_id } = c.req.valid('param');
      const { delivery } = await ownedDelivery(c, id, delivery_id);
      return c.json(
        { data: deliveryResource(delivery), message: 'Delivery retrieved', meta: { request_id: c.var.requestId } },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'get',
      path: '/{id}/deliveries/{delivery_id}/attempts',
      operationId: 'listDeliveryAttempts',
      tags,
      summary: 'List the attempts of a delivery, first attempt first',
      request: { params: DeliveryParamsSchema },
      responses: {
        200: success(envelope(z.array(DeliveryAttemptSchema)), 'The attempts'),
        ...errorResponses(401, 403, 404),
      },
    }),
    async (c) => {
      const { id, delivery_id } = c.req.valid('param');
      await ownedDelivery(c, id, delivery_id);
      const attempts = await listAttempts(c.var.deps.db, delivery_id);
      return c.json(
        {
          data: attempts.map(attemptResource),
          message: `${attempts.length} attempt${attempts.length === 1 ? '' : 's'}`,
          meta: { request_id: c.var.requestId },
        },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'post',
      path: '/{id}/deliveries/{delivery_id}/retry',
      operationId: 'retryDelivery',
      tags,
      summary: 'Retry a failed or dead-lettered delivery now',
      request: { params: DeliveryParamsSchema },
      responses: {
        202: success(envelope(DeliverySchema), 'Queued for retry; the delivery is pending again'),
        ...errorResponses(401, 403, 404, 409),
      },
    }),
    async (c) => {
      const { id, delivery_id } = c.req.valid('param');
      const { webhook, delivery } = await ownedDelivery(c, id, delivery_id);
      const { db, scheduler } = c.var.deps;
      const previous = await queueManualRetry(db, delivery_id);
      if (!previous) {
        // Read again: a concurrent retry or attempt may have moved it since `ownedDelivery`.
        const current = await findDelivery(db, id, delivery_id);
        if (!current) throw new ApiError('not_found', `delivery ${delivery_id} not found for webhook ${id}`);
        throw new ApiError(
          'conflict',
          `delivery ${delivery_id} is ${current.status}; only failed or dead_letter deliveries can be retried`,
        );
      }
      try {
        await scheduler.retry({
          deliveryId: delivery_id,
          webhookId: webhook.id,
          projectId: webhook.projectId,
          event: delivery.event,
          url: webhook.url,
        });
      } catch (error) {
        await restoreRetryableState(db, delivery_id, previous);
        throw error;
      }
      c.var.logger.info({ previousStatus: previous.status }, 'delivery queued for manual retry');
      const queued = await findDelivery(db, id, delivery_id);
      return c.json(
        {
          data: deliveryResource(queued ?? delivery),
          message: `Delivery ${delivery_id} is queued for retry`,
          meta: { request_id: c.var.requestId },
        },
        202,
      );
    },
  );
