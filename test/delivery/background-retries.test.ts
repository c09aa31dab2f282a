import { expect, it } from 'vitest';
import { withRetries } from '../../src/temporal/activity-completion.ts';

it('a call to Temporal being tried again gives up once the worker has stopped', async () => {
  const stopping = new AbortController();
  let calls = 0;
  const tried = withRetries(async () => {
    calls += 1;
    // The first try fails (Temporal unreachable); the worker stops during the pause after it.
    setImmediate(() => stopping.abort());
    throw new Error('Temporal unreachable');
  }, stopping.signal);
  // Without the stop, the next try would come a second later and the last about a minute later.
  expect(await tried).toBe(false);
  expect(calls).toBe(1);
});

it('goes on trying while the worker runs, until the call goes through', async () => {
  let calls = 0;
  const tried = withRetries(async () => {
    calls += 1;
    if (calls < 2) throw new Error('Temporal unreachable');
  }, new AbortController().signal);
  expect(await tried).toBe(true);
  expect(calls).toBe(2);
});
