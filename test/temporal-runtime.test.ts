/**
 * src/temporal/runtime.ts: the Temporal SDK runtime the service installs leaves the process's
 * signals to the service, whose stop closes the HTTP server before the worker begins its own
 * (src/runtime.ts), and logs the SDK's lines through the service's logger, failures included.
 */
import { Runtime } from '@temporalio/worker';
import { Writable } from 'node:stream';
import { beforeAll, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { installTemporalRuntime } from '../src/temporal/runtime.ts';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGQUIT', 'SIGUSR2'] as const;
const lines: Record<string, unknown>[] = [];
let listenersBefore: number[];

beforeAll(() => {
  listenersBefore = SIGNALS.map((signal) => process.listenerCount(signal));
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  installTemporalRuntime(createLogger('info', {}, destination));
});

it('installs a runtime that leaves SIGINT and SIGTERM to the service', () => {
  expect(Runtime.instance().options.shutdownSignals).toEqual([]);
  expect(SIGNALS.map((signal) => process.listenerCount(signal))).toEqual(listenersBefore);
});

it("logs the SDK's failures with their message and stack", () => {
  Runtime.instance().logger.warn('Activity failed', { activityType: 'sweepRetentionBatch', error: new Error('database unreachable') });
  const line = lines.find((entry) => entry['msg'] === 'Activity failed');
  expect(line).toMatchObject({ component: 'temporal-sdk', activityType: 'sweepRetentionBatch', err: { message: 'database unreachable', stack: expect.stringContaining('Error: database unreachable') } });
});
