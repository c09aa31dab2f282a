/**
 * The workflow interceptors of the bundle with tracing (`workflow-bundle.tracing.js`, used when
 * tracing is on): OpenTelemetry's, which make the workflow's span (`RunWorkflow:…`, a child of
 * the client's start span, whose context comes in the start's headers), one per activity it
 * schedules (`StartActivity:…`, whose context goes out in the activity's headers) and one per
 * signal it handles; plus a link between a manual retry and the delivery it retries.
 *
 * Deterministic like the workflows: spans are made with the sandbox's clock and seeded
 * randomness, and they leave the sandbox through a sink, which records nothing in the history
 * and is not called during replay. The interceptors add no command, so a workflow started
 * without them replays with them and the other way round (docs/operators.md, "Tracing"), as
 * long as no workflow uses the seeded randomness (Math.random, uuid4) for what it sends to
 * Temporal: span ids draw from it, so tracing on or off would change those values.
 */
import { trace, type Span } from '@opentelemetry/api';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type { Next, SignalInput, WorkflowExecuteInput, WorkflowInboundCallsInterceptor, WorkflowInterceptors } from '@temporalio/workflow';
import { retrySignal } from './delivery.ts';

/**
 * OpenTelemetry's inbound interceptor, and: a retry signal's span (in the trace of the API call
 * that sent it) links to the delivery's workflow span, which records the request as an event
 * naming that trace.
 */
class DeliveryInboundInterceptor extends OpenTelemetryInboundInterceptor {
  #workflowSpan: Span | undefined;

  override execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    return super.execute(input, (inner) => {
      this.#workflowSpan = trace.getActiveSpan();
      return next(inner);
    });
  }

  override handleSignal(input: SignalInput, next: Next<WorkflowInboundCallsInterceptor, 'handleSignal'>): Promise<void> {
    return super.handleSignal(input, (inner) => {
      const signalSpan = trace.getActiveSpan();
      if (inner.signalName === retrySignal.name && signalSpan && this.#workflowSpan) {
        signalSpan.addLink({ context: this.#workflowSpan.spanContext() });
        this.#workflowSpan.addEvent('retry requested', { 'webhooks.retry.trace_id': signalSpan.spanContext().traceId });
      }
      return next(inner);
    });
  }
}

/** The workflow interceptors factory the bundle calls for each workflow. */
export const interceptors = (): WorkflowInterceptors => ({
  inbound: [new DeliveryInboundInterceptor()],
  outbound: [new OpenTelemetryOutboundInterceptor()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
