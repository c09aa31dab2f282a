import { BackgroundWork } from '../temporal/background-work.ts';

/**
 * The sends a worker process has in flight after their activities handed them off. A send
 * activity takes its places and prepares its request while it holds a worker slot, then leaves
 * the HTTP exchange to the background and frees the slot: a hanging endpoint holds sockets and
 * a little memory, never the slots other customers' sends need. What bounds the background is
 * WORKER_MAX_SENDS_IN_FLIGHT: a send is admitted before it asks for places, and waits (in its
 * slot) while the process is full.
 */
export class SendsInFlight {
  readonly #max: number;
  readonly #background = new BackgroundWork();
  #admitted = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(max: number) {
    this.#max = max;
  }

  /** Sends admitted and not yet ended (running in the background, or being prepared). */
  get size(): number {
    return this.#admitted;
  }

  /** WORKER_MAX_SENDS_IN_FLIGHT. */
  get capacity(): number {
    return this.#max;
  }

  /**
   * Resolves when there is room for one more send, with the admission: `run` it in the
   * background, or `cancel` it when nothing is to be sent. Waiters are admitted in order.
   * Resolves undefined, with no room taken, when one of `signals` aborts first (the activity was
   * cancelled, or its worker began to stop); they are listened to only while the send waits.
   */
  async admit(signals: readonly AbortSignal[] = []): Promise<Admission | undefined> {
    if (signals.some((signal) => signal.aborted)) return undefined;
    if (this.#admitted >= this.#max) {
      // A send that ends hands its room straight to the first waiter, so none is taken in between.
      const admitted = await new Promise<boolean>((resolve) => {
        const giveUp = () => {
          for (const signal of signals) signal.removeEventListener('abort', giveUp);
          this.#waiting.splice(this.#waiting.indexOf(admit), 1);
          resolve(false);
        };
        const admit = () => {
          for (const signal of signals) signal.removeEventListener('abort', giveUp);
          resolve(true);
        };
        this.#waiting.push(admit);
        for (const signal of signals) signal.addEventListener('abort', giveUp, { once: true });
      });
      if (!admitted) return undefined;
    } else this.#admitted += 1;
    let state: 'admitted' | 'running' | 'ended' = 'admitted';
    const end = () => {
      if (state === 'ended') return;
      state = 'ended';
      const next = this.#waiting.shift();
      if (next) next();
      else this.#admitted -= 1;
    };
    return {
      run: (send) => {
        if (state !== 'admitted') throw new Error('a send admission runs once');
        state = 'running';
        this.#background.run(() => send().finally(end));
      },
      cancel: () => {
        if (state === 'admitted') end();
      },
    };
  }

  /** Resolves when every send in the background has ended, or after `timeoutMs`; answers how many had not. */
  drain(timeoutMs: number): Promise<number> {
    return this.#background.drain(timeoutMs);
  }
}

/** A send admitted by {@link SendsInFlight.admit}. */
export interface Admission {
  /** Runs the send in the background; it must not reject (report its failures itself). */
  run(send: () => Promise<void>): void;
  /** Gives the room back unused. Idempotent; a no-op once `run` was called. */
  cancel(): void;
}
