import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';

/**
 * A SERVER span around each request, active while it is handled (its logs carry its trace id,
 * the workflows it starts join its trace), named `<method> <route>` after the route pattern
 * (`POST /internal/v1/events`): never the request's path, query, headers or body. A request
 * whose path starts with `trustedPrefix` (the producers' door, called by the operator's own
 * services) continues the caller's trace from its `traceparent` header; others start a trace
 * of their own, so customers cannot join our spans to ids they chose, nor sample them.
 */
export function httpServerSpans(trustedPrefix: string): MiddlewareHandler {
  const tracer = trace.getTracer('webhooks');
  return async (c, next) => {
    const method = c.req.method;
    const parent = c.req.path.startsWith(trustedPrefix) ? propagation.extract(context.active(), c.req.header()) : context.active();
    await tracer.startActiveSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent, async (span) => {
      try {
        await next();
      } finally {
        const status = c.res.status;
        const route = status === 404 ? undefined : routePath(c);
        if (route) span.updateName(`${method} ${route}`).setAttribute('http.route', route);
        span.setAttribute('http.response.status_code', status);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
    });
  };
}
