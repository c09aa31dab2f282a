import { createRoute } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { createRetryOperation, findOperation, finishOperation, type OperationView } from '../../db/queries/operations.ts';
import { isLookupId } from '../../ids.ts';
import { endOperation } from '../../operations/lifecycle.ts';
import { ownedWebhook } from '../auth.ts';
import type { AppEnv } from '../env.ts';
import { ApiError } from '../errors.ts';
import { BulkRetryBodySchema, IdParamsSchema, OperationParamsSchema, OperationSchema, OperationStartedSchema, envelope } from '../schemas.ts';
import { createRouter } from '../validation.ts';
import { emptyBodyIsNoBody, errorResponses, optionalJsonBody, success } from './shared.ts';

const tags = ['Operations'];

const operationResource = (operation: OperationView) => ({
  id: operation.id,
  status: operation.status,
  matched: operation.matched,
  retried: operation.retried,
  skipped: operation.skipped,
});

async function ownedOperation(c: Context<AppEnv>, webhookId: string, operationId: string) {
  await ownedWebhook(c, webhookId);
  const operation = isLookupId(operationId) ? await findOperation(c.var.deps.db, webhookId, operationId) : undefined;
  if (!operation) throw new ApiError('not_found', `operation ${operationId} not found for webhook ${webhookId}`);
  c.set('logger', c.var.logger.child({ operationId }));
  return operation;
}

/** Link parameters to the operation a bulk retry started. */
const STARTED_OPERATION = { id: '$request.path.id', operation_id: '$response.body#/data/id' };

export const operationsRouter = createRouter()
  .openapi(
    createRoute({
      method: 'post',
      path: '/{id}/deliveries/retry',
      operationId: 'retryDeliveries',
      tags,
      summary: 'Retry, at a bounded rate, every delivery of the webhook in the given statuses (bulk retry)',
      middleware: [emptyBodyIsNoBody],
      request: {
        params: IdParamsSchema,
        body: optionalJsonBody(BulkRetryBodySchema),
      },
      responses: {
        202: success(envelope(OperationStartedSchema), 'The operation is running', {
          getOperation: STARTED_OPERATION,
          cancelOperation: STARTED_OPERATION,
        }),
        ...errorResponses(400, 401, 403, 404, 409),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const body = c.req.valid('json') ?? {};
      const webhook = await ownedWebhook(c, id);
      const { db, scheduler } = c.var.deps;
      const now = new Date();
      const until = body.until && Date.parse(body.until) < now.getTime() ? new Date(body.until) : now;
      const created = await createRetryOperation(
        db,
        { projectId: webhook.projectId, webhookId: webhook.id, statuses: body.status ?? ['dead_letter'], since: body.since ? new Date(body.since) : undefined, until },
        c.var.deps.admission.maxBulkRetries,
      );
      if ('running' in created) {
        throw new ApiError('conflict', `operation ${created.running} is already retrying deliveries of webhook ${webhook.id}: cancel it, or wait until it ends`);
      }
      if ('projectLimit' in created) {
        throw new ApiError('conflict', `project ${webhook.projectId} has ${created.projectLimit} bulk retries running, its limit: wait until one ends`);
      }
      const operation = created;
      try {
        await scheduler.startRetryOperation(operation);
      } catch (error) {
        // No delivery was touched: the operation is kept, as failed, for the record.
        await finishOperation(db, operation.id, 'failed');
        throw error;
      }
      c.var.logger.info({ operationId: operation.id }, 'bulk retry operation started');
      return c.json(
        {
          data: { id: operation.id, status: operation.status, matched: operation.matched },
          message: `Retrying the deliveries of webhook ${webhook.id} that match; follow the operation for how many`,
          meta: { request_id: c.var.requestId },
        },
        202,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'get',
      path: '/{id}/operations/{operation_id}',
      operationId: 'getOperation',
      tags,
      summary: 'Get a bulk operation and its progress',
      request: { params: OperationParamsSchema },
      responses: {
        200: success(envelope(OperationSchema), 'The operation'),
        ...errorResponses(401, 403, 404),
      },
    }),
    async (c) => {
      const { id, operation_id } = c.req.valid('param');
      const operation = await ownedOperation(c, id, operation_id);
      return c.json(
        { data: operationResource(operation), message: `Operation ${operation.id} is ${operation.status}`, meta: { request_id: c.var.requestId } },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: 'delete',
      path: '/{id}/operations/{operation_id}',
      operationId: 'cancelOperation',
      tags,
      summary: 'Cancel a bulk operation (it ends its step in hand, at most one second of its retries, and records itself cancelled)',
      request: { params: OperationParamsSchema },
      responses: {
        202: success(envelope(OperationSchema), 'Cancellation requested; the operation as it stands'),
        ...errorResponses(401, 403, 404),
      },
    }),
    async (c) => {
      const { id, operation_id } = c.req.valid('param');
      let operation = await ownedOperation(c, id, operation_id);
      const running = operation.status === 'running';
      if (running && !(await c.var.deps.scheduler.cancelOperation(operation.id))) {
        // No workflow runs it (its start was lost, or it was ended from outside): it ends here.
        await endOperation(c.var.deps, operation.id, 'cancelled');
        operation = await ownedOperation(c, id, operation_id);
      }
      return c.json(
        {
          data: operationResource(operation),
          message: !running ? `Operation ${operation.id} is already ${operation.status}` : operation.status === 'running' ? `Operation ${operation.id} is being cancelled` : `Operation ${operation.id} is ${operation.status}`,
          meta: { request_id: c.var.requestId },
        },
        202,
      );
    },
  );
