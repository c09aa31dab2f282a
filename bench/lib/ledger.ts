/**
 * Which deliveries a run is waiting for, and the latency of each that landed: the receiver's
 * reports matched to the publish calls that created them, by phase of the run.
 */

/** One delivery that reached the receiver: when, and how long after its publish call started (ms). */
export interface Landing {
  t: number;
  latency: number;
}

/**
 * Matches landings (first verified 200 per delivery id, from the receiver) to the publish calls
 * whose answers named them, in whichever order the two arrive: a fast delivery can land before
 * the 202 that names it has been read.
 */
export class DeliveryLedger<Phase extends string> {
  /** Named by a publish answer, not landed yet: the phase and when the call started. */
  readonly #waiting = new Map<string, { phase: Phase; at: number }>();
  /** Landed before any publish answer named them. */
  readonly #early = new Map<string, number>();
  readonly #landings = new Map<Phase, Landing[]>();
  readonly #expected = new Map<Phase, number>();

  /** A publish call of `phase`, started at `at`, was answered with delivery `id`. */
  sent(id: string, phase: Phase, at: number): void {
    this.#expected.set(phase, this.expected(phase) + 1);
    const t = this.#early.get(id);
    if (t === undefined) {
      this.#waiting.set(id, { phase, at });
      return;
    }
    this.#early.delete(id);
    this.landings(phase).push({ t, latency: t - at });
  }

  /** The receiver got delivery `id`, for the first time and with a valid signature, at `t`. */
  landed(id: string, t: number): void {
    const sent = this.#waiting.get(id);
    if (!sent) {
      this.#early.set(id, t);
      return;
    }
    this.#waiting.delete(id);
    this.landings(sent.phase).push({ t, latency: t - sent.at });
  }

  /** The landings of `phase` so far: a live array, in landing order. */
  landings(phase: Phase): Landing[] {
    let list = this.#landings.get(phase);
    if (!list) this.#landings.set(phase, (list = []));
    return list;
  }

  /** Deliveries that publish answers of `phase` named. */
  expected(phase: Phase): number {
    return this.#expected.get(phase) ?? 0;
  }

  /** The deliveries of `phase` that have not landed, with when their publish call started. */
  waiting(phase: Phase): { id: string; at: number }[] {
    return [...this.#waiting].filter(([, sent]) => sent.phase === phase).map(([id, { at }]) => ({ id, at }));
  }

  /** Landings that no publish answer has named (a delivery the run did not ask for). */
  get unexpected(): number {
    return this.#early.size;
  }
}
