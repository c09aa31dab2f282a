/**
 * A real OpenTelemetry Collector (built by scripts/otel-collector.mjs from
 * deploy/observability/collector/builder.yaml) on free loopback ports: OTLP over gRPC and HTTP in,
 * every span written as JSON lines to a file, read back here. For the tracing tests and the
 * benchmark's --tracing run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ensureCollector } from '../../scripts/otel-collector.mjs';
import { freePort } from './ports.ts';
import { deadlineIn } from './wait.ts';

/** An attribute value as OTLP JSON carries it. */
interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined;

/** One exported span, flattened: its resource's attributes folded in as `resource`. */
export interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer (OTLP's numbering). */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  resource: Record<string, string | number | boolean>;
  events: { name: string; attributes: Record<string, string | number | boolean> }[];
  links: { traceId: string; spanId: string }[];
  status: { code?: number; message?: string };
}

/** A running collector. */
export interface Collector {
  /** OTLP over gRPC: `http://127.0.0.1:<port>`. */
  readonly grpcEndpoint: string;
  /** OTLP over HTTP: `http://127.0.0.1:<port>` (traces at `/v1/traces`). */
  readonly httpEndpoint: string;
  /** Everything written so far, as written (for searching it whole). */
  text(): string;
  /** Every span written so far. */
  spans(): ExportedSpan[];
  /** The collector's process, for the benchmark's CPU and memory accounting. */
  readonly pid: number;
  /** Stops it (its last spans written out); what it wrote stays readable. */
  stop(): Promise<void>;
}

function attributeMap(attributes: OtlpAttributes): Record<string, string | number | boolean> {
  const map: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    map[key] = value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.doubleValue ?? value.boolValue ?? '';
  }
  return map;
}

/**
 * The spans of the file exporter's JSON lines (one OTLP `ExportTraceServiceRequest` per line);
 * a last line still being written is left for the next read.
 */
export function parseSpans(text: string): ExportedSpan[] {
  const spans: ExportedSpan[] = [];
  for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean)) {
    for (const resourceSpans of JSON.parse(line).resourceSpans ?? []) {
      const resource = attributeMap(resourceSpans.resource?.attributes);
      for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
        for (const span of scopeSpans.spans ?? []) {
          spans.push({
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId ?? '',
            name: span.name,
            kind: span.kind ?? 0,
            attributes: attributeMap(span.attributes),
            resource,
            events: (span.events ?? []).map((event: { name: string; attributes: OtlpAttributes }) => ({
              name: event.name,
              attributes: attributeMap(event.attributes),
            })),
            links: (span.links ?? []).map((link: { traceId: string; spanId: string }) => ({ traceId: link.traceId, spanId: link.spanId })),
            status: span.status ?? {},
          });
        }
      }
    }
  }
  return spans;
}

function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts a collector (building it first if .tools/bin has no current one). */
export async function startCollector(): Promise<Collector> {
  const binary = ensureCollector();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'otelcol-'));
  const output = path.join(dir, 'spans.jsonl');
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const configFile = path.join(dir, 'config.yaml');
  writeFileSync(
    configFile,
    [
      'receivers:',
      '  otlp:',
      '    protocols:',
      `      grpc: { endpoint: "127.0.0.1:${grpcPort}" }`,
      `      http: { endpoint: "127.0.0.1:${httpPort}" }`,
      'exporters:',
      // JSON lines, written out every 100 ms.
      `  file: { path: ${JSON.stringify(output)}, flush_interval: 100ms }`,
      'service:',
      // No metrics server of its own (it would take port 8888 of every collector).
      '  telemetry: { metrics: { level: none }, logs: { level: warn } }',
      '  pipelines:',
      '    traces: { receivers: [otlp], exporters: [file] }',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(binary, ['--config', `file:${configFile}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let running = true;
  void exited.then(() => (running = false));

  const deadline = deadlineIn(30_000);
  while (!((await acceptsConnections(grpcPort)) && (await acceptsConnections(httpPort)))) {
    if (!running || deadline.passed()) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`the collector did not start:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  let kept: string | undefined;
  const text = () => kept ?? (existsSync(output) ? readFileSync(output, 'utf8') : '');
  return {
    grpcEndpoint: `http://127.0.0.1:${grpcPort}`,
    httpEndpoint: `http://127.0.0.1:${httpPort}`,
    pid: child.pid!,
    text,
    spans: () => parseSpans(text()),
    async stop() {
      if (running) {
        child.kill('SIGTERM');
        await exited;
      }
      kept = text();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
