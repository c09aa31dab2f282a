/** The offered load of a fixed-rate run: calls started on a schedule, not when the previous one ended. */
import { isInterrupted } from './lifecycle.ts';
import { now, sleep } from './output.ts';

/**
 * Starts `fire(seq)` for seq 0 … total - 1 at `rate` per second from now (an open loop: a slow
 * answer does not delay the next call), with at most `maxInFlight` calls open: a call due while
 * that many are open waits for the next tick, and that tick counts as a stall. Stops starting
 * calls at Ctrl-C; resolves with the stalls once every call started has ended.
 */
export async function fireAtRate(rate: number, total: number, maxInFlight: number, fire: (seq: number) => Promise<void>): Promise<number> {
  const start = now();
  const running = new Set<Promise<void>>();
  let stalls = 0;
  let seq = 0;
  while (seq < total && !isInterrupted()) {
    const due = Math.min(total, Math.floor(((now() - start) / 1000) * rate) + 1);
    while (seq < due) {
      if (running.size >= maxInFlight) {
        stalls += 1;
        break;
      }
      const call = fire(seq++).finally(() => running.delete(call));
      running.add(call);
    }
    await sleep(Math.max(1, Math.min(10, 1000 / rate / 2)));
  }
  await Promise.all(running);
  return stalls;
}
