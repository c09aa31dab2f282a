import { pino, type Logger } from 'pino';

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

/** Structured JSON logs on stdout; secrets, tokens, custom headers and event data are redacted. */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'webhooks', ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  });
}
