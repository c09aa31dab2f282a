/**
 * OpenTelemetry tracing, on when the configuration names an OTLP endpoint (src/config.ts,
 * `tracing`). Off, nothing of the SDK is loaded, no interceptor is installed and no span is made:
 * this module imports types only, and the SDK (./sdk.ts) is loaded by a dynamic import when on.
 */
import type { ClientInterceptors } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { TracingConfig } from '../config.ts';

/** The process's role, which names its spans' service unless OTEL_SERVICE_NAME does. */
export type TracedRole = 'all' | 'api' | 'worker';

/** The service name of each role when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one. */
const DEFAULT_SERVICE_NAMES: Record<TracedRole, string> = {
  all: 'webhooks',
  api: 'webhooks-api',
  worker: 'webhooks-worker',
};

/** Tracing of a running process. */
export interface Tracing {
  /** Interceptors of the Temporal client: workflow starts and signals become spans and carry their context in headers. */
  readonly clientInterceptors: ClientInterceptors;
  /** What the worker adds: the activity interceptors, and the sink the workflows' spans are exported through. */
  readonly workerOptions: Required<Pick<WorkerOptions, 'interceptors' | 'sinks'>>;
  /** Exports the spans not yet exported, then unregisters the SDK. */
  shutdown(): Promise<void>;
}

/** Starts tracing for `role` when `config` is set (tracing on); resolves undefined when it is off. */
export async function startTracing(config: TracingConfig | undefined, role: TracedRole, logger: Logger): Promise<Tracing | undefined> {
  if (!config) return undefined;
  const serviceName = config.serviceName ?? DEFAULT_SERVICE_NAMES[role];
  const { startSdk } = await import('./sdk.ts');
  const tracing = await startSdk(config, serviceName, logger);
  // The endpoint's origin only: its path or query could hold a credential, and the headers are never logged.
  logger.info({ endpoint: new URL(config.endpoint).origin, protocol: config.protocol, serviceName, sampler: config.sampler }, 'tracing on: spans exported over OTLP');
  return tracing;
}
