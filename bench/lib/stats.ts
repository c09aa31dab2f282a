/** Percentiles and per-second series. */

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function sortNumbers(values: ArrayLike<number>): Float64Array {
  const copy = Float64Array.from(values as ArrayLike<number>);
  copy.sort();
  return copy;
}

export function percentiles(values: ArrayLike<number>): Percentiles {
  const sorted = sortNumbers(values);
  return {
    p50: round(percentile(sorted, 50)),
    p95: round(percentile(sorted, 95)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.length ? sorted[sorted.length - 1]! : Number.NaN),
  };
}

export function round(value: number, digits = 1): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** One second of the run. */
export interface SecondBin {
  /** Seconds since the load started (bin start). */
  t: number;
  published: number;
  delivered: number;
  latency?: { p50: number; p95: number; p99: number } | undefined;
}

/**
 * Bins landings (time, latency) and publishes (time) into 1-second windows from `origin`.
 * Latency percentiles are those of the deliveries that landed in each window.
 */
export function perSecond(
  origin: number,
  end: number,
  publishes: ArrayLike<number>,
  landings: { t: number; latency: number }[],
): SecondBin[] {
  const count = Math.max(1, Math.ceil((end - origin) / 1000));
  const bins: SecondBin[] = Array.from({ length: count }, (_, i) => ({ t: i, published: 0, delivered: 0 }));
  const latencies: number[][] = Array.from({ length: count }, () => []);
  for (let i = 0; i < publishes.length; i += 1) {
    const index = Math.floor((publishes[i]! - origin) / 1000);
    if (index >= 0 && index < count) bins[index]!.published += 1;
  }
  for (const landing of landings) {
    const index = Math.floor((landing.t - origin) / 1000);
    if (index < 0 || index >= count) continue;
    bins[index]!.delivered += 1;
    latencies[index]!.push(landing.latency);
  }
  for (let i = 0; i < count; i += 1) {
    if (latencies[i]!.length === 0) continue;
    const { p50, p95, p99 } = percentiles(latencies[i]!);
    bins[i]!.latency = { p50, p95, p99 };
  }
  return bins;
}

/**
 * Sustained landing rate: deliveries per second between the moments 10% and 90% of all the
 * landings had happened (the middle 80%), so ramp-up and the last stragglers do not count.
 * Under capacity it equals the offered rate; with a backlog it is the rate the system drains at.
 */
export function sustainedThroughput(bins: readonly SecondBin[]): number {
  const total = bins.reduce((sum, bin) => sum + bin.delivered, 0);
  if (total === 0) return 0;
  const at = (fraction: number) => {
    const target = total * fraction;
    let cumulative = 0;
    for (const bin of bins) {
      if (cumulative + bin.delivered >= target) {
        // Linear within the second.
        return bin.t + (bin.delivered ? (target - cumulative) / bin.delivered : 0);
      }
      cumulative += bin.delivered;
    }
    return bins.length;
  };
  const t10 = at(0.1);
  const t90 = at(0.9);
  return t90 > t10 ? (total * 0.8) / (t90 - t10) : total;
}

/** The highest number of landings in any `window` consecutive seconds, per second. */
export function peakThroughput(bins: readonly SecondBin[], window = 10): number {
  let best = 0;
  for (let i = 0; i + window <= Math.max(bins.length, window); i += 1) {
    const sum = bins.slice(i, i + window).reduce((s, bin) => s + bin.delivered, 0);
    best = Math.max(best, sum / window);
  }
  return best;
}
