/**
 * What the service adds to its traces, through the OpenTelemetry API only (no-ops while tracing
 * is off): attributes on the active span (a request's, an activity's), and a CLIENT span around
 * the HTTP exchange of a send attempt.
 */
import { SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import type { SendResult } from '../delivery/sender.ts';
import { traceparentOf } from './context.ts';

const tracer = trace.getTracer('webhooks');

/** Sets attributes (./attributes.ts) on the active span: the request's, or the running activity's (`RunActivity:…`). */
export function annotateActiveSpan(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * Runs the HTTP exchange of an attempt in a CLIENT span `POST` recording the target's host and
 * port only (its path and query may hold the customer's tokens), the response's status code, and
 * `error.type` when the attempt failed. `exchange` is given the `traceparent` naming that span
 * (undefined while tracing is off), for DELIVERY_TRACEPARENT.
 */
export function tracedExchange(url: string, exchange: (traceparent: string | undefined) => Promise<SendResult>): Promise<SendResult> {
  const target = new URL(url);
  const attributes = {
    'http.request.method': 'POST',
    'server.address': target.hostname,
    'server.port': Number(target.port || 443),
  };
  return tracer.startActiveSpan('POST', { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      const sent = await exchange(traceparentOf(span.spanContext()));
      if (sent.statusCode !== undefined) span.setAttribute('http.response.status_code', sent.statusCode);
      if (sent.outcome !== 'succeeded') {
        span.setAttribute('error.type', sent.statusCode !== undefined ? String(sent.statusCode) : sent.outcome);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      return sent;
    } finally {
      span.end();
    }
  });
}
