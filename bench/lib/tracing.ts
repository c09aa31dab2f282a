/**
 * `--tracing`: the service (every replica, with --cluster) exports its spans to a real
 * OpenTelemetry Collector (test/support/collector.ts) over OTLP/HTTP with protobuf, as an
 * operator turns tracing on (OTEL_EXPORTER_OTLP_ENDPOINT); the collector is measured as a
 * process group of its own, so a run with and one without tracing compare the service's CPU and
 * memory per delivery.
 */
import { startCollector } from '../../test/support/collector.ts';
import { killOnExit, onCleanup } from './lifecycle.ts';
import type { ProcessGroup } from './procstat.ts';

/** A collector started for the run. */
export interface BenchCollector {
  /** The service's environment that turns tracing on, pointed at the collector. */
  readonly env: Record<string, string>;
  readonly group: ProcessGroup;
  /** Stops the collector (the service has stopped: every span is in) and says what it received. */
  summary(): Promise<{ exporter: string; spans_exported: number }>;
}

export async function startBenchCollector(): Promise<BenchCollector> {
  process.stderr.write('starting the OpenTelemetry Collector (--tracing)...\n');
  const collector = await startCollector();
  killOnExit(collector.pid);
  onCleanup(() => collector.stop());
  return {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.httpEndpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' },
    group: { name: 'collector', pids: () => [collector.pid] },
    async summary() {
      await collector.stop();
      return {
        exporter: 'OTLP over HTTP (protobuf) to the OpenTelemetry Collector of deploy/observability/collector, file exporter',
        spans_exported: collector.spans().length,
      };
    },
  };
}
