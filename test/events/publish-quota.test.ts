/**
 * An API replica remembers a refusal of the publish quota for a moment (its time, a second at
 * most), so that a flood costs the database little. That moment is timed on the monotonic clock:
 * the machine's wall clock set back (an NTP correction, a resumed VM) must not keep a project
 * refused for as long as the clock went back.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DatabaseHandle } from '../../src/db/client.ts';
import { PublishQuota } from '../../src/events/quota.ts';
import { openTestDatabase } from '../support/database.ts';
import { sleep } from '../support/wait.ts';

let handle: DatabaseHandle;

beforeAll(async () => {
  handle = await openTestDatabase();
});
afterAll(async () => {
  await handle?.close();
});

describe('a refusal the publish quota remembers', () => {
  it('is forgotten when its time has come, though the wall clock was set an hour back meanwhile', async () => {
    const quota = new PublishQuota(handle.db, { rate: 2, burst: 1 });
    const projectId = `proj_clock_${process.pid}`;
    const credential = 'whpk_clock_step_credential';
    expect(await quota.take(projectId, credential)).toEqual({ granted: true });
    const refused = await quota.take(projectId, credential);
    if (refused.granted) throw new Error('the second event within the step of the quota was accepted');
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(500);
    expect(quota.refusedCredential(credential)).toMatchObject({ projectId });

    const wallClock = Date.now;
    const stepped = vi.spyOn(Date, 'now').mockImplementation(() => wallClock.call(Date) - 3_600_000);
    try {
      await sleep(refused.retryAfterMs + 50);
      // Forgotten: the next event is the database's to decide (not asked here: PGlite's clock is this process's).
      expect(quota.refusedCredential(credential)).toBeUndefined();
    } finally {
      stepped.mockRestore();
    }
  });
});
