import { Runtime, type LogLevel, type LogMetadata } from '@temporalio/worker';
import type { Logger } from 'pino';

const PINO_LEVEL = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;

/**
 * Installs the Temporal SDK runtime of this process: its log lines go to `logger`
 * (structured JSON like every other line) and, given `prometheusBindAddress` (the worker
 * roles), its metrics to a Prometheus exporter there. Must run before the first
 * `NativeConnection`: the client and the worker both connect through it. The SDK does not
 * listen for signals: the service's own stop begins the worker's, in its order, after the HTTP
 * server's close, so a send waiting for room learns of the stop as soon as the worker's begins.
 */
export function installTemporalRuntime(logger: Logger, prometheusBindAddress?: string): void {
  const sdk = logger.child({ component: 'temporal-sdk' });
  const log = (level: LogLevel, message: string, meta: LogMetadata = {}) => {
    // The SDK hands a failure over as `error`; pino serializes (message, stack) only `err`.
    const { error, ...rest } = meta;
    sdk[PINO_LEVEL[level]](error instanceof Error ? { ...rest, err: error } : meta, message);
  };
  Runtime.install({
    shutdownSignals: [],
    logger: {
      log,
      trace: (message, meta) => log('TRACE', message, meta),
      debug: (message, meta) => log('DEBUG', message, meta),
      info: (message, meta) => log('INFO', message, meta),
      warn: (message, meta) => log('WARN', message, meta),
      error: (message, meta) => log('ERROR', message, meta),
    },
    ...(prometheusBindAddress && {
      telemetryOptions: {
        metrics: { prometheus: { bindAddress: prometheusBindAddress, countersTotalSuffix: true, useSecondsForDurations: true } },
      },
    }),
  });
}
