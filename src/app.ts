import { OpenAPIHono } from '@hono/zod-openapi';
import { randomUUID } from 'node:crypto';
import { bodyLimit } from 'hono/body-limit';
import { createMiddleware } from 'hono/factory';
import { HTTPException } from 'hono/http-exception';
import type { Context } from 'hono';
import { routePath } from 'hono/route';
import type { AppDeps, AppEnv } from './api/env.ts';
import { ApiError, errorBody } from './api/errors.ts';
import { isForeignKeyViolation } from './db/client.ts';
import { docsRouter } from './api/routes/docs.ts';
import { eventsRouter } from './api/routes/events.ts';
import { healthRouter } from './api/routes/health.ts';
import { SECURITY_SCHEMES } from './api/routes/shared.ts';
import { portalSessionsRouter } from './api/routes/portal-sessions.ts';
import { webhooksRouter } from './api/routes/webhooks.ts';
import { PORTAL_BASE } from './portal/link.ts';
import { portalRouter } from './portal/router.ts';
import { PublishLanes } from './events/publish-lanes.ts';
import { PublishQuota } from './events/quota.ts';
import { httpServerSpans } from './tracing/http-server.ts';

/** Base path of the v2 management API (spec 4). */
export const V2_BASE = '/api-gateway/v2';
/** Base path of the producers' door. */
export const INTERNAL_BASE = '/internal/v1';
export const OPENAPI_PATH = `${V2_BASE}/openapi.json`;
export const MAX_BODY_BYTES = 1024 * 1024;
/** Events of one project an API process publishes at once (src/events/publish-lanes.ts). */
const PUBLISHES_AT_ONCE_PER_PROJECT = 2;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i;

/**
 * A regular expression matching exactly the request paths a Hono route path (`/webhooks/:id`)
 * serves: parameters match one segment, everything else literally, no trailing slash.
 */
function exactPathPattern(routePath: string): RegExp {
  const segments = routePath
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${segments.join('/')}$`);
}

function toErrorResponse(c: Context<AppEnv>, error: ApiError) {
  for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
  return c.json(errorBody(error.code, error.message, c.var.requestId), error.status);
}

/** Turns any thrown error into a v2 error body; internals of 500s are logged, never returned. */
function asApiError(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error;
  if (error instanceof HTTPException) {
    if (error.status === 400) {
      return new ApiError('invalid_request', /json/i.test(error.message) ? 'body: is not valid JSON' : error.message);
    }
    if (error.status === 413) return new ApiError('invalid_request', `body: must be at most ${MAX_BODY_BYTES} bytes`);
    // The routes' own media-type check, stricter than ours (`application/json;`), and also applied to an empty body.
    if (error.status === 415) return new ApiError('invalid_request', 'Content-Type must be application/json');
  }
  // A row the request's own statement refers to (its webhook, say) was deleted while it ran; the
  // statement stored nothing.
  if (isForeignKeyViolation(error)) return new ApiError('conflict', 'something this request refers to was deleted while it ran; nothing was stored');
  return undefined;
}

/**
 * Builds the HTTP application: the v2 management API, the producers' door, health
 * checks and the OpenAPI document. It never listens; `src/main.ts` serves it.
 */
export function createApp(deps: AppDeps) {
  const app = new OpenAPIHono<AppEnv>();
  const quota = new PublishQuota(deps.db, deps.admission.publish);
  const publishLanes = new PublishLanes(PUBLISHES_AT_ONCE_PER_PROJECT);

  // First, so that the span covers the whole request; the producers' door starts its own once
  // the producer is authenticated, continuing the producer's trace (eventsRouter).
  if (deps.tracing) app.use(httpServerSpans({ callerTracedPrefix: INTERNAL_BASE, untracedPaths: ['/healthz', '/readyz'] }));
  app.use(async (c, next) => {
    const incoming = c.req.header('X-Request-Id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : `req_${randomUUID()}`;
    c.set('requestId', requestId);
    c.set('deps', deps);
    c.set('quota', quota);
    c.set('publishLanes', publishLanes);
    c.set('logger', deps.logger.child({ requestId }));
    c.header('X-Request-Id', requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      const labels = { method: c.req.method, route: c.res.status === 404 ? 'unmatched' : routePath(c), status: String(c.res.status) };
      deps.metrics.httpRequests.inc(labels);
      deps.metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
    }
  });

  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError('invalid_request', `body: must be at most ${MAX_BODY_BYTES} bytes`);
      },
    }),
  );

  const requireJsonBody = createMiddleware<AppEnv>(async (c, next) => {
    const hasBody = c.req.header('Content-Length') !== '0' && ['POST', 'PATCH', 'PUT'].includes(c.req.method);
    const contentType = c.req.header('Content-Type');
    if (hasBody && contentType !== undefined && !JSON_CONTENT_TYPE.test(contentType)) {
      throw new ApiError('invalid_request', 'Content-Type must be application/json');
    }
    await next();
  });
  // The portal's forms post form data; its own router reads them.
  app.use(`${V2_BASE}/*`, requireJsonBody);
  app.use(`${INTERNAL_BASE}/*`, requireJsonBody);

  app.route('/', healthRouter);

  const v2 = new OpenAPIHono<AppEnv>();
  v2.route('/webhooks', webhooksRouter);
  v2.route('/portal', portalSessionsRouter);
  app.route(V2_BASE, v2);
  app.route(INTERNAL_BASE, eventsRouter);

  // The server is the origin the document was fetched from, so "try it" in a reference page
  // and generated clients call the service that served it.
  app.doc31(OPENAPI_PATH, (c) => ({
    openapi: '3.1.0',
    info: {
      title: 'Webhooks API v2',
      version: '2.0.0',
      description: 'Webhook management and delivery inspection. Every response carries meta.request_id.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: new URL(c.req.url).origin, description: 'the service that served this document' }],
    security: [{ [SECURITY_SCHEMES.apiKey]: [] }],
  }));
  app.openAPIRegistry.registerComponent('securitySchemes', SECURITY_SCHEMES.apiKey, {
    type: 'http',
    scheme: 'bearer',
    description: 'A customer API token with the webhooks service enabled (spec 5).',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', SECURITY_SCHEMES.producerToken, {
    type: 'http',
    scheme: 'bearer',
    description:
      "A producer key (an API key with the events service), which publishes for its own project only; or the operator's EVENT_PRODUCER_TOKEN, when one is set, for every project.",
  });
  app.route('/docs', docsRouter(OPENAPI_PATH));
  app.route(PORTAL_BASE, portalRouter((request, env) => app.fetch(request, env)));

  const routePatterns = () =>
    app.routes
      .filter((route) => route.method !== 'ALL')
      .map((route) => ({ method: route.method, pattern: exactPathPattern(route.path) }));

  app.notFound((c) => {
    const allowed = [
      ...new Set(routePatterns().filter((route) => route.pattern.test(c.req.path)).map((route) => route.method)),
    ];
    if (allowed.length > 0) {
      return toErrorResponse(
        c,
        new ApiError('method_not_allowed', `${c.req.method} is not allowed here; use ${allowed.join(', ')}`, {
          Allow: allowed.join(', '),
        }),
      );
    }
    return toErrorResponse(c, new ApiError('not_found', `no route for ${c.req.method} ${c.req.path}`));
  });

  app.onError((error, c) => {
    const known = asApiError(error);
    if (known) return toErrorResponse(c, known);
    (c.var.logger ?? deps.logger).error({ err: error, requestId: c.var.requestId }, 'unhandled error');
    return toErrorResponse(c, new ApiError('internal_error', 'internal error; safe to retry with backoff'));
  });

  return app;
}

/** The application type, for typed clients and tests. */
export type App = ReturnType<typeof createApp>;
