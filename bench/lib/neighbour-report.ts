/** The report of a noisy-neighbour run (bench/noisy-neighbour.ts): its console tables and its chart. */
import { renderChart, type ChartSpec } from './chart.ts';
import { fmtP, latencyPanel, printTable } from './output.ts';
import type { Percentiles, SecondBin } from './stats.ts';

/** A's figures in one phase of the run. */
export interface PhaseResult {
  events_published: number;
  /** Scheduler ticks at which --max-in-flight publish calls were already open. */
  publish_cap_stalls: number;
  deliveries_expected: number;
  /** Landed within the phase's wait. */
  delivered: number;
  /** Not landed by the deadline, and still held by the service: they would land later. */
  late: number;
  /** Not landed, and no longer held by the service (delivered unseen, dead-lettered, or unknown). */
  lost: number;
  /** The first 10 of them. */
  lost_ids: string[];
  /** Publish call started → receiver got the POST; a late delivery counts at what it had waited. */
  latency_ms: Percentiles;
  /** True when late deliveries count in `latency_ms`: the real figures are higher. */
  latency_is_lower_bound: boolean;
  publish_ms: Percentiles;
  /** When the phase started (seconds of the run's timeline), how long it published, how long it then waited. */
  started_s: number;
  publishing_s: number;
  waited_s: number;
}

/** B's deliveries and B's endpoint at one moment of the run. */
export interface NeighbourSample {
  /** Seconds since A's first phase began. */
  t: number;
  /** What the run was doing: alone, burst (B publishing), beside (A publishing again), waiting (for A's deliveries). */
  stage: string;
  deliveries: number;
  /** B's deliveries by status. */
  statuses: Record<string, number>;
  /** Attempts of B's deliveries so far. */
  attempts: number;
  /** Requests B's endpoint has received. */
  endpoint_requests: number;
  /** Requests open at B's endpoint now, and the most at once since the previous sample. */
  open_requests: number;
  open_requests_peak: number;
}

/** What the report reads of the run's result. */
export interface NeighbourResult {
  mode: string;
  date: string;
  host: { cpus: number };
  offered_rate: number;
  duration_s: number;
  alone: PhaseResult;
  beside: PhaseResult;
  p99_ratio: number;
  lost: number;
  invalid_signatures: number;
  publish_errors: number;
  healthy_endpoint: { duplicates: number; invalid_signatures: number; unexpected_deliveries: number };
  neighbour: {
    events: number;
    accepted: number;
    publish_s: number;
    hold_s: number;
    endpoint_requests: number;
    endpoint_max_open_requests: number;
    endpoint_tls_connections: number;
    sample_every_s: number;
    samples: NeighbourSample[];
  };
  timeline: SecondBin[];
}

const STATUS_COLORS: Record<string, string> = {
  pending: '#7f7f7f',
  processing: '#ff7f0e',
  failed: '#d62728',
  dead_letter: '#000000',
  delivered: '#2ca02c',
};

const latency = (phase: PhaseResult) => `${phase.latency_is_lower_bound ? '≥ ' : ''}${fmtP(phase.latency_ms)}`;

/** Distinct status names in the order a delivery goes through them, unknown ones last. */
function inOrder(names: string[]): string[] {
  const known = Object.keys(STATUS_COLORS);
  const rank = (name: string) => (known.includes(name) ? known.indexOf(name) : known.length);
  return [...new Set(names)].sort((x, y) => rank(x) - rank(y));
}

/** B's deliveries by status ('none' before the first). */
export function formatStatuses(sample: NeighbourSample | undefined): string {
  const statuses = sample?.statuses ?? {};
  return inOrder(Object.keys(statuses)).map((name) => `${name} ${statuses[name]}`).join(', ') || 'none';
}

/** Prints A's two phases side by side, then B's deliveries over the run (at most about 20 samples). */
export function printNeighbourReport(result: NeighbourResult, files: { json: string; svg: string }): void {
  const { alone, beside, neighbour } = result;
  const last = neighbour.samples.at(-1);
  printTable(
    `Noisy neighbour (${result.mode}): A at ${result.offered_rate} events/s for ${result.duration_s} s alone | beside B's ${neighbour.events} events to an endpoint that holds each request ${neighbour.hold_s} s`,
    [
      ['A: delivered / expected (late, lost)', [alone, beside].map((p) => `${p.delivered} / ${p.deliveries_expected} (late ${p.late}, lost ${p.lost})`).join('  |  ')],
      ['A: latency_ms', `${latency(alone)}  |  ${latency(beside)}`],
      ['A: publish_ms', `${fmtP(alone.publish_ms)}  |  ${fmtP(beside.publish_ms)}`],
      ['A: p99 beside / alone', `${beside.latency_is_lower_bound ? '≥ ' : ''}${result.p99_ratio} (target ≤ 2: ${result.p99_ratio <= 2 && !beside.latency_is_lower_bound ? 'met' : 'not met'})`],
      ['A: duplicates / invalid signatures / unexpected', `${result.healthy_endpoint.duplicates} / ${result.healthy_endpoint.invalid_signatures} / ${result.healthy_endpoint.unexpected_deliveries}`],
      ['B: events accepted', `${neighbour.accepted} of ${neighbour.events} in ${neighbour.publish_s} s`],
      ['B: deliveries at the end', `${formatStatuses(last)}; ${last?.attempts ?? 0} attempts`],
      ['B: endpoint', `${neighbour.endpoint_requests} requests, at most ${neighbour.endpoint_max_open_requests} open at once, ${neighbour.endpoint_tls_connections} TLS connections`],
      ['lost / invalid signatures / publish errors', `${result.lost} / ${result.invalid_signatures} / ${result.publish_errors}`],
      ['json', files.json],
      ['chart', files.svg],
    ],
  );
  const step = Math.max(1, Math.ceil(neighbour.samples.length / 20));
  console.log(`\nB's deliveries over the run (${step > 1 ? `one sample in ${step}, ` : ''}every ${neighbour.sample_every_s} s)`);
  for (const [i, sample] of neighbour.samples.entries()) {
    if (i % step !== 0 && i !== neighbour.samples.length - 1) continue;
    console.log(
      `${`${sample.t} s`.padStart(8)}  ${sample.stage.padEnd(7)}  ${formatStatuses(sample).padEnd(72)}  attempts ${String(sample.attempts).padStart(5)}  open ${sample.open_requests_peak}`,
    );
  }
}

/** A's latency and deliveries per second over both phases, B's deliveries by status, and the requests open at B's endpoint. */
export function renderNeighbourChart(result: NeighbourResult, markers: ChartSpec['markers']): string {
  const { alone, beside, neighbour, timeline } = result;
  const samples = neighbour.samples;
  const names = inOrder(samples.flatMap((sample) => Object.keys(sample.statuses)));
  return renderChart({
    title: `Noisy neighbour (${result.mode}): A at ${result.offered_rate}/s alone, then beside B's ${neighbour.events} events to a hanging endpoint`,
    subtitle: [
      `A alone p50 ${alone.latency_ms.p50} / p99 ${alone.latency_ms.p99} ms · beside p50 ${beside.latency_ms.p50} / p99 ${beside.latency_ms.p99} ms${beside.latency_is_lower_bound ? ' (lower bounds: late deliveries)' : ''} · p99 ratio ${result.p99_ratio} (target ≤ 2) · A late ${alone.late + beside.late}, lost ${result.lost}`,
      `${result.date} · ${result.host.cpus} cores · A for ${result.duration_s} s in each phase · B's endpoint holds each request ${neighbour.hold_s} s, at most ${neighbour.endpoint_max_open_requests} open at once`,
    ],
    xMax: timeline.length,
    markers,
    panels: [
      { ...latencyPanel(timeline), title: "A's latency of the deliveries that landed in each second (publish call started → receiver got the POST)" },
      {
        title: "A's deliveries per second",
        yLabel: 'per second',
        series: [
          { name: 'delivered/s', color: '#1f77b4', points: timeline.map((bin) => [bin.t + 0.5, bin.delivered]) },
          { name: 'published/s', color: '#aaaaaa', dash: '5 3', points: timeline.map((bin) => [bin.t + 0.5, bin.published]) },
        ],
      },
      {
        title: "B's deliveries by status, and their attempts",
        yLabel: 'deliveries',
        series: [
          ...names.map((name) => ({ name, color: STATUS_COLORS[name] ?? '#333', points: samples.map((s) => [s.t, s.statuses[name] ?? 0] as [number, number]) })),
          { name: 'attempts', color: '#9467bd', dash: '4 3', points: samples.map((s) => [s.t, s.attempts] as [number, number]) },
        ],
      },
      {
        title: "Requests open at B's endpoint (the most at once in each sample)",
        yLabel: 'requests',
        series: [{ name: 'open', color: '#d62728', points: samples.map((s) => [s.t, s.open_requests_peak] as [number, number]) }],
      },
    ],
  });
}
