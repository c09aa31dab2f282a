import { context, propagation, SpanKind, SpanStatusCode, trace, type Context as TraceContext } from '@opentelemetry/api';
import type { Context, MiddlewareHandler, Next } from 'hono';
import { routePath } from 'hono/route';

const tracer = trace.getTracer('webhooks');

/**
 * Runs the rest of a request in a SERVER span under `parent`, named `<method> <route>` after the
 * route pattern (`POST /internal/v1/events`): never the request's path, query, headers or body.
 */
async function inServerSpan(c: Context, next: Next, parent: TraceContext): Promise<void> {
  const method = c.req.method;
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
}

/**
 * A SERVER span around each request, active while it is handled (its logs carry its trace id,
 * the workflows it starts join its trace), in a trace of its own: a caller's `traceparent` is
 * ignored, so customers cannot join our spans to ids they chose, nor decide their sampling.
 * Requests under `callerTracedPrefix` (the producers' door) get their span from
 * {@link callerTracedSpans} instead, once their caller is authenticated. The health probes
 * (`untracedPaths`) are not traced: they start no work, and a load balancer's probes would fill
 * the traces.
 */
export function httpServerSpans(options: { callerTracedPrefix: string; untracedPaths: readonly string[] }): MiddlewareHandler {
  const untraced = new Set(options.untracedPaths);
  return async (c, next) => {
    if (untraced.has(c.req.path) || c.req.path.startsWith(options.callerTracedPrefix)) return next();
    await inServerSpan(c, next, context.active());
  };
}

/**
 * The SERVER span of a request whose caller has been authenticated as one the operator trusts
 * with its traces (a producer): it continues the caller's trace from its `traceparent` header.
 * Mounted after authentication, so that an unauthenticated request never decides a trace id or
 * its sampling; requests refused before it are in the logs and metrics, not in a trace.
 */
export function callerTracedSpans(): MiddlewareHandler {
  return (c, next) => inServerSpan(c, next, propagation.extract(context.active(), c.req.header()));
}
