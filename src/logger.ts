import { pino, type DestinationStream, type Logger } from 'pino';
import { traceFields } from './tracing/context.ts';

/** Field paths that must never reach a log line, wherever they appear. */
const REDACTED_PATHS = [
  'secret',
  '*.secret',
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'headers',
  '*.headers',
  'data',
  '*.data',
  'payload',
  '*.payload',
];

/**
 * Structured JSON logs, on stdout unless another destination is given; secrets, tokens,
 * custom headers and event data are redacted wherever they appear as fields. A line written
 * while a span is active (tracing on) carries its `trace_id` and `span_id`.
 */
export function createLogger(
  level: string,
  base: Record<string, unknown> = {},
  destination?: DestinationStream,
): Logger {
  const options = {
    level,
    base: { service: 'webhooks', ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    mixin: traceFields,
  };
  return destination ? pino(options, destination) : pino(options);
}
