/**
 * The trace context where the service needs it without the SDK: log fields, the `traceparent`
 * an event keeps for a later workflow start, and the one sent to customer endpoints. Only the
 * OpenTelemetry API is used here (already loaded by prom-client), which does nothing while
 * tracing is off: no span is active and nothing is injected.
 */
import { context, isSpanContextValid, propagation, trace, type SpanContext } from '@opentelemetry/api';

/** `trace_id` and `span_id` of the active span, for a log line (pino's mixin); nothing without one. */
export function traceFields(): { trace_id?: string; span_id?: string } {
  const spanContext = trace.getActiveSpan()?.spanContext();
  return spanContext && isSpanContextValid(spanContext) ? { trace_id: spanContext.traceId, span_id: spanContext.spanId } : {};
}

/** The W3C `traceparent` header value of a span context: `00-<trace id>-<span id>-<flags>`. */
export function traceparentOf(spanContext: SpanContext): string | undefined {
  if (!isSpanContextValid(spanContext)) return undefined;
  return `00-${spanContext.traceId}-${spanContext.spanId}-${spanContext.traceFlags.toString(16).padStart(2, '0')}`;
}

/** The `traceparent` of the active span, to be stored with work that starts later (the outbox). */
export function currentTraceparent(): string | undefined {
  const span = trace.getActiveSpan();
  return span ? traceparentOf(span.spanContext()) : undefined;
}

/**
 * Runs `fn` as a continuation of the trace a stored `traceparent` names, so that what it starts
 * (a workflow, from the repair check) joins that trace; runs it as is without one.
 */
export function withTraceparent<T>(traceparent: string | null | undefined, fn: () => T): T {
  if (!traceparent) return fn();
  return context.with(propagation.extract(context.active(), { traceparent }), fn);
}
