import { createRoute, z } from '@hono/zod-openapi';
import { acceptedEvent, publishEvent } from '../../events/publish.ts';
import { PublishEventSchema } from '../../events/schema.ts';
import { callerTracedSpans } from '../../tracing/http-server.ts';
import { requireProducer } from '../auth.ts';
import { ApiError, rateLimited } from '../errors.ts';
import { envelope } from '../schemas.ts';
import { createRouter } from '../validation.ts';
import { errorResponses, jsonBody, SECURITY_SCHEMES, STARTS_LATER, success } from './shared.ts';

const PublishedSchema = z
  .object({ event_id: z.string(), delivery_ids: z.array(z.string()) })
  .openapi('PublishedEvent');

const producerSpans = callerTracedSpans();

/**
 * The producers' door: `POST /internal/v1/events`, behind a producer key (or the operator's
 * EVENT_PRODUCER_TOKEN); with tracing on, an authenticated publish continues the producer's trace.
 */
export const eventsRouter = createRouter();
eventsRouter.use('/events', requireProducer, (c, next) => (c.var.deps.tracing ? producerSpans(c, next) : next()));
eventsRouter.openapi(
  createRoute({
    method: 'post',
    path: '/events',
    operationId: 'publishEvent',
    tags: ['Events (internal)'],
    summary: 'Publish an event; one delivery per active, subscribed webhook of the project',
    security: [{ [SECURITY_SCHEMES.producerToken]: [] }],
    request: { body: jsonBody(PublishEventSchema) },
    responses: {
      202: success(envelope(PublishedSchema), "Accepted: every delivery is stored and its workflow started (or, when Temporal did not answer, started shortly by the service's repair check, as `message` says)"),
      ...errorResponses(400, 401, 403, 429),
    },
  }),
  async (c) => {
    const input = c.req.valid('json');
    const scope = c.var.producerProjectId;
    if (scope !== undefined && input.project_id !== scope) {
      throw new ApiError('forbidden', `project_id: this producer key publishes for project ${scope} only`);
    }
    // A producer key publishes for one project: its refusal can stand for the key. The operator's
    // token publishes for every project, so its refusals stand for the project only.
    const quota = await c.var.quota.take(input.project_id, scope !== undefined ? c.var.producerToken : undefined);
    if (!quota.granted) throw await rateLimited(input.project_id, quota.retryAfterMs);
    const published = await acceptedEvent(c.var.publishLanes.run(input.project_id, () => publishEvent(c.var.deps, input)));
    if (published.created) c.var.deps.metrics.eventsAccepted.inc();
    const { startsLater } = published;
    c.var.logger[startsLater ? 'warn' : 'info'](
      { eventId: published.eventId, deliveries: published.deliveryIds.length, created: published.created, ...(startsLater && { startsLater }) },
      startsLater ? 'event accepted; its workflows did not all start, the repair check starts them' : 'event accepted',
    );
    const accepted = published.created
      ? `Event accepted for ${published.deliveryIds.length} deliver${published.deliveryIds.length === 1 ? 'y' : 'ies'}`
      : 'Event already accepted earlier; returning its deliveries';
    return c.json(
      {
        data: { event_id: published.eventId, delivery_ids: published.deliveryIds },
        message: startsLater ? `${accepted}; ${STARTS_LATER}` : accepted,
        meta: { request_id: c.var.requestId },
      },
      202,
    );
  },
);
