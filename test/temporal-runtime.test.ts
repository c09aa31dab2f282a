/**
 * src/temporal/runtime.ts: the Temporal SDK runtime the service installs leaves the process's
 * signals to the service, whose stop closes the HTTP server before the worker begins its own
 * (src/runtime.ts); the SDK's default handlers would begin the worker's at once.
 */
import { Runtime } from '@temporalio/worker';
import pino from 'pino';
import { expect, it } from 'vitest';
import { installTemporalRuntime } from '../src/temporal/runtime.ts';

it('installs a runtime that leaves SIGINT and SIGTERM to the service', () => {
  const signals = ['SIGINT', 'SIGTERM', 'SIGQUIT', 'SIGUSR2'] as const;
  const before = signals.map((signal) => process.listenerCount(signal));
  installTemporalRuntime(pino({ level: 'silent' }));
  expect(Runtime.instance().options.shutdownSignals).toEqual([]);
  expect(signals.map((signal) => process.listenerCount(signal))).toEqual(before);
});
