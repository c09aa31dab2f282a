/** Waiting helpers of the tests. */

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A time `ms` from now for a wait to end by, on the monotonic clock. */
export interface Deadline {
  /** Whether it has passed. */
  passed(): boolean;
  /** Milliseconds left until it (0 once passed). */
  leftMs(): number;
}

/**
 * A deadline `ms` from now on the monotonic clock: a step of the machine's wall clock (an NTP
 * correction; a CI machine's was seen to step 28 s forward in the middle of a test) neither ends
 * a wait early nor stretches it, as a deadline on `Date.now()` would.
 */
export function deadlineIn(ms: number): Deadline {
  const at = performance.now() + ms;
  return { passed: () => performance.now() >= at, leftMs: () => Math.max(0, at - performance.now()) };
}

/** Polls `probe` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 60_000, intervalMs = 250 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = deadlineIn(timeoutMs);
  let lastError: unknown;
  while (!deadline.passed()) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`);
}
