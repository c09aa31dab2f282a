/**
 * What tracing adds to Temporal's SDK, with a tracer provider registered (src/tracing/sdk.ts):
 * the client's and the worker's OpenTelemetry interceptors, and the sink the workflows' spans,
 * made in the workflow sandbox, reach the span processor through.
 */
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from '../tracing/index.ts';

/** The Temporal interceptors and the workflows' span sink that export through `processor`. */
export function temporalTracing(processor: SpanProcessor, resource: Resource): Pick<Tracing, 'clientInterceptors' | 'workerOptions'> {
  return {
    clientInterceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
    workerOptions: {
      interceptors: {
        activity: [
          (ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) }),
        ],
      },
      sinks: { exporter: makeWorkflowExporter(processor, resource) },
    },
  };
}
