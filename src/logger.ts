import { DrizzleQueryError } from 'drizzle-orm';
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
 * An error as a log line holds it; a failed query's without its parameters (a webhook's URL with
 * its token, a sealed value), which its message and a field of its own would otherwise carry.
 */
function serializeError(error: Error): Record<string, unknown> {
  const serialized = pino.stdSerializers.err(error);
  if (!(error instanceof DrizzleQueryError)) return serialized;
  const { params: _parameters, ...rest } = serialized as Record<string, unknown>;
  const message = `Failed query: ${error.query}`;
  return { ...rest, message, stack: serialized.stack.replace(error.message, message) };
}

/**
 * Structured JSON logs, on stdout unless another destination is given; secrets, tokens,
 * custom headers and event data are redacted wherever they appear as fields, and a failed query's
 * parameters are left out of its error. A line written while a span is active (tracing on)
 * carries its `trace_id` and `span_id`.
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
    serializers: { err: serializeError },
    mixin: traceFields,
  };
  return destination ? pino(options, destination) : pino(options);
}
