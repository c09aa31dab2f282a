/**
 * The OpenTelemetry SDK of a process with tracing on: loaded only by `startTracing`'s dynamic
 * import, so a process with tracing off never loads it. Everything is configured from the
 * parsed configuration (src/config.ts), nothing from the environment; the OTLP exporter
 * packages still fall back on the OTEL_EXPORTER_OTLP_* variables they know for what is not
 * given here (OTEL_EXPORTER_OTLP_TIMEOUT, _COMPRESSION, _CERTIFICATE…), and the SDK reads the
 * span limits and batch settings (OTEL_BSP_*, OTEL_SPAN_*_LIMIT) itself, as the specification has it.
 */
import os from 'node:os';
import { context, diag, DiagLogLevel, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';
import type { TraceSampler, TracingConfig } from '../config.ts';
import { temporalTracing } from '../temporal/tracing.ts';
import type { Tracing } from './index.ts';

function createSampler(kind: TraceSampler, ratio: number): Sampler {
  switch (kind) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

async function createExporter(config: TracingConfig): Promise<SpanExporter> {
  switch (config.protocol) {
    case 'http/protobuf': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
      return new OTLPTraceExporter({ url: config.endpoint, headers: config.headers });
    }
    case 'http/json': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
      return new OTLPTraceExporter({ url: config.endpoint, headers: config.headers });
    }
    case 'grpc': {
      const [{ OTLPTraceExporter }, { Metadata }] = await Promise.all([
        import('@opentelemetry/exporter-trace-otlp-grpc'),
        import('@grpc/grpc-js'),
      ]);
      const metadata = new Metadata();
      for (const [name, value] of Object.entries(config.headers)) metadata.set(name, value);
      // An http:// endpoint is plain text, https:// TLS (the exporter decides from the URL).
      return new OTLPTraceExporter({ url: config.endpoint, metadata });
    }
  }
}

/**
 * Registers a tracer provider (W3C trace context, AsyncLocalStorage context) that batches spans
 * to the OTLP endpoint, and returns the Temporal interceptors that put workflow starts,
 * workflows and activities into traces.
 */
export async function startSdk(config: TracingConfig, serviceName: string, logger: Logger): Promise<Tracing> {
  const sdkLogger = logger.child({ component: 'opentelemetry' });
  // Export failures are reported through the diagnostic logger: to the service's log, as warnings.
  diag.setLogger(
    {
      error: (message) => sdkLogger.error(message),
      warn: (message) => sdkLogger.warn(message),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    DiagLogLevel.WARN,
  );
  const resource = new Resource({
    'host.name': os.hostname(),
    'process.pid': process.pid,
    ...config.resourceAttributes,
    'service.name': serviceName,
  });
  const processor = new BatchSpanProcessor(await createExporter(config));
  const provider = new BasicTracerProvider({
    resource,
    sampler: createSampler(config.sampler, config.samplerRatio),
    spanProcessors: [processor],
  });
  provider.register({ contextManager: new AsyncLocalStorageContextManager(), propagator: new W3CTraceContextPropagator() });

  return {
    ...temporalTracing(processor, resource),
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (error) {
        sdkLogger.warn({ err: error }, 'the last spans could not be exported');
      } finally {
        // Unregistered, so that the process could register a provider again.
        trace.disable();
        context.disable();
        propagation.disable();
        diag.disable();
      }
    },
  };
}
