import { pino, type DestinationStream, type Logger } from 'pino';

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
 * custom headers and event data are redacted wherever they appear as fields.
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
  };
  return destination ? pino(options, destination) : pino(options);
}
