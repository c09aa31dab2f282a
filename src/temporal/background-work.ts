/**
 * Work a worker process runs in its background after an activity handed it off (the activity
 * completed asynchronously, and the work reports its end by task token): a stopping worker waits
 * for it, so that its report goes out before the connection to Temporal closes.
 */
export class BackgroundWork {
  readonly #running = new Set<Promise<void>>();

  /** Runs `work` in the background, tracked until it ends; it must not reject (it reports its failures itself). */
  run(work: () => Promise<void>): void {
    const running = work().finally(() => this.#running.delete(running));
    this.#running.add(running);
  }

  /** Resolves when all the work in the background has ended, or after `timeoutMs`; answers how much had not. */
  async drain(timeoutMs: number): Promise<number> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([Promise.allSettled([...this.#running]), timeout]);
    clearTimeout(timer);
    return this.#running.size;
  }
}
