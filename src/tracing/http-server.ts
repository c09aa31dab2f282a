import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';

/**
 * A SERVER span around each request, active while it is handled (its logs carry its trace id,
 * the workflows it starts join its trace), named `<method> <route>` after the route pattern
 * (`POST /internal/v1/events`): never the request's path, query, headers or body. A request
 * whose path starts with `trustedPrefix` (the producers' door, called by the operator's own
 * services) continues the caller's trace from its `traceparent` header; any other ignores that
 * header, so customers cannot join our spans to ids they chose, nor decide their sampling. The
 * health probes (`untracedPaths`) are not traced: they start no work, and a load balancer's
 * probes would fill the traces.
 */
export function httpServerSpans(options: { trustedPrefix: string; untracedPaths: readonly string[] }): MiddlewareHandler {
  const tracer = trace.getTracer('webhooks');
  const { trustedPrefix } = options;
  const untraced = new Set(options.untracedPaths);
  return async (c, next) => {
    if (untraced.has(c.req.path)) return next();
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
