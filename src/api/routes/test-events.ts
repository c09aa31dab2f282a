import { createRoute, z } from '@hono/zod-openapi';
import { acceptedEvent, publishTestEvent } from '../../events/publish.ts';
import { ownedWebhook } from '../auth.ts';
import { ApiError, rateLimited } from '../errors.ts';
import { envelope, IdParamsSchema } from '../schemas.ts';
import { createRouter } from '../validation.ts';
import { errorResponses, STARTS_LATER, success } from './shared.ts';

const TestEventSchema = z
  .object({ event_id: z.string(), delivery_id: z.string() })
  .openapi('TestEvent');

export const testEventsRouter = createRouter().openapi(
  createRoute({
    method: 'post',
    path: '/{id}/test-events',
    operationId: 'sendTestEvent',
    tags: ['Webhooks'],
    summary: 'Send a sample docauth.completed to this webhook only',
    description:
      'A real event with made-up data (its request_id starts with test_): stored, signed, retried and listed like any other delivery. The webhook must be active.',
    request: { params: IdParamsSchema },
    responses: {
      202: success(envelope(TestEventSchema), 'Accepted: the delivery is stored and its workflow started', {
        getDelivery: { id: '$request.path.id', delivery_id: '$response.body#/data/delivery_id' },
      }),
      ...errorResponses(401, 403, 404, 409, 429),
    },
  }),
  async (c) => {
    const webhook = await ownedWebhook(c, c.req.valid('param').id);
    if (webhook.status !== 'active') {
      throw new ApiError('conflict', `webhook ${webhook.id} is disabled; set its status to active to send a test event`);
    }
    // Test events count toward the project's publish quota, as its producers' events do.
    const quota = await c.var.quota.take(webhook.projectId);
    if (!quota.granted) throw await rateLimited(webhook.projectId, quota.retryAfterMs);
    const published = await acceptedEvent(c.var.publishLanes.run(webhook.projectId, () => publishTestEvent(c.var.deps, webhook.projectId, webhook.id)));
    // Disabled or deleted between the check and the insert: nothing was stored.
    if (!published) throw new ApiError('conflict', `webhook ${webhook.id} is no longer active; no test event was sent`);
    const deliveryId = published.deliveryIds[0]!;
    const { startsLater } = published;
    c.var.deps.metrics.eventsAccepted.inc();
    c.var.logger[startsLater ? 'warn' : 'info'](
      { eventId: published.eventId, deliveryId, ...(startsLater && { startsLater }) },
      startsLater ? 'test event accepted; its workflow did not start, the repair check starts it' : 'test event accepted',
    );
    return c.json(
      {
        data: { event_id: published.eventId, delivery_id: deliveryId },
        message: `Test event accepted; ${startsLater ? `${STARTS_LATER}; ` : ''}follow its delivery in the deliveries list`,
        meta: { request_id: c.var.requestId },
      },
      202,
    );
  },
);
