/**
 * What the service adds to its traces, through the OpenTelemetry API only (no-ops while tracing
 * is off): attributes on the active span (a request's, an activity's), the span of a send attempt
 * and a CLIENT span around its HTTP exchange.
 */
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context } from '@opentelemetry/api';
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
 * `error.type` when the attempt failed. `exchange` is given the `traceparent` naming that span,
 * for DELIVERY_TRACEPARENT. Outside a trace (tracing off) it runs `exchange` as is: no span, no
 * context switch, no parsing of the URL.
 */
export function tracedExchange(url: string, exchange: (traceparent: string | undefined) => Promise<SendResult>): Promise<SendResult> {
  if (!trace.getActiveSpan()) return exchange(undefined);
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

/** Marks the active span (an attempt's) failed, with the attempt's `last_error` text. */
export function failActiveSpan(message: string): void {
  trace.getActiveSpan()?.setStatus({ code: SpanStatusCode.ERROR, message });
}

/**
 * The active trace context when a span is active (tracing on), to continue in work that outlives
 * the activity that started it (the background part of a send); undefined otherwise.
 */
export function activeTraceContext(): Context | undefined {
  const active = context.active();
  return trace.getSpan(active) ? active : undefined;
}

/**
 * Runs a send attempt's background part in its span, `webhooks.attempt` (a child of the
 * activity's `RunActivity:sendDelivery`, which ends when the activity hands the attempt off):
 * the attempt's attributes, its HTTP exchange and its log lines are in it. Without a trace it
 * runs as is.
 */
export function inAttemptSpan<T>(parent: Context | undefined, attributes: Attributes, run: () => Promise<T>): Promise<T> {
  if (!parent) return run();
  return context.with(parent, () =>
    tracer.startActiveSpan('webhooks.attempt', { attributes }, async (span) => {
      try {
        return await run();
      } finally {
        span.end();
      }
    }),
  );
}
