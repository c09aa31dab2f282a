/** The report of a noisy-neighbour run (bench/noisy-neighbour.ts): its console tables, its Markdown row and its chart. */
import { renderChart, type ChartSpec, type Panel } from './chart.ts';
import { fmtP, latencyPanel, printTable } from './output.ts';
import type { Percentiles, SecondBin } from './stats.ts';

/** How a set of deliveries that must land did: A's in one phase, or B's accepted events in publish-flood. */
export interface DeliveryFigures {
  deliveries_expected: number;
  /** Landed within the wait. */
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
}

/** A's figures in one phase of the run. */
export interface PhaseResult extends DeliveryFigures {
  events_published: number;
  /** Scheduler ticks at which --max-in-flight publish calls were already open. */
  publish_cap_stalls: number;
  publish_ms: Percentiles;
  /** When the phase started (seconds of the run's timeline), how long it published, how long it then waited. */
  started_s: number;
  publishing_s: number;
  waited_s: number;
  /**
   * The machine's cores busy while A published (every process: the service, its backends, the
   * bench): near the run's `host.cpus`, the machine was saturated, and the p99 ratio measures its
   * capacity rather than one project's cost to another.
   */
  machine_busy_cores: number;
}

/** B's deliveries and B's endpoint at one moment of the run. */
export interface NeighbourSample {
  /** Seconds since A's first phase began. */
  t: number;
  /**
   * What the run was doing: alone, B's load (burst, settling, backlog), beside (A publishing
   * again), waiting (for A's deliveries), draining (waiting for B's deliveries that must land).
   */
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
  /** B's own cumulative counts (publish-flood: events accepted and refused; bulk-retry: its operations' matched, retried, skipped). */
  progress?: Record<string, number>;
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
  healthy_endpoint: { host: string; duplicates: number; invalid_signatures: number; unexpected_deliveries: number };
  neighbour: {
    scenario: string;
    /** What B is: "B's 1000 events to an endpoint that holds each request 45 s". */
    description: string;
    /** When B's load started (seconds of the run's timeline). */
    started_s: number;
    /** The scenario's own report rows (label → value). */
    report: Record<string, string>;
    /** B's deliveries that had to land (publish-flood's accepted events). */
    accepted_deliveries?: DeliveryFigures;
    endpoint_host: string;
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
const PROGRESS_COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

const latency = (figures: DeliveryFigures) => `${figures.latency_is_lower_bound ? '≥ ' : ''}${fmtP(figures.latency_ms)}`;
const landed = (figures: DeliveryFigures) => `${figures.delivered} / ${figures.deliveries_expected} (late ${figures.late}, lost ${figures.lost})`;

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

/** B's own counts of the sample ('' without any). */
export function formatProgress(sample: NeighbourSample | undefined): string {
  return Object.entries(sample?.progress ?? {}).map(([name, value]) => `${name} ${value}`).join(', ');
}

/** Prints A's two phases side by side, B's figures, B's deliveries over the run (at most about 20 samples), and the Markdown table. */
export function printNeighbourReport(result: NeighbourResult, files: { json: string; svg: string }): void {
  const { alone, beside, neighbour } = result;
  const last = neighbour.samples.at(-1);
  printTable(`Noisy neighbour, ${neighbour.scenario} (${result.mode}): A at ${result.offered_rate} events/s for ${result.duration_s} s alone | beside ${neighbour.description}`, [
    ['A: delivered / expected (late, lost)', `${landed(alone)}  |  ${landed(beside)}`],
    ['A: latency_ms', `${latency(alone)}  |  ${latency(beside)}`],
    ['A: publish_ms', `${fmtP(alone.publish_ms)}  |  ${fmtP(beside.publish_ms)}`],
    ['machine: cores busy while A published', `${busyCores(alone, result)}  |  ${busyCores(beside, result)}`],
    ['A: p99 beside / alone', `${beside.latency_is_lower_bound ? '≥ ' : ''}${result.p99_ratio} (target ≤ 2: ${result.p99_ratio <= 2 && !beside.latency_is_lower_bound ? 'met' : 'not met'})`],
    ['A: duplicates / invalid signatures / unexpected', `${result.healthy_endpoint.duplicates} / ${result.healthy_endpoint.invalid_signatures} / ${result.healthy_endpoint.unexpected_deliveries}`],
    ...Object.entries(neighbour.report),
    ...(neighbour.accepted_deliveries
      ? ([
          ['B: accepted deliveries: delivered / expected (late, lost)', landed(neighbour.accepted_deliveries)],
          ['B: accepted deliveries: latency_ms', latency(neighbour.accepted_deliveries)],
        ] as [string, string][])
      : []),
    ['B: deliveries at the end', `${formatStatuses(last)}; ${last?.attempts ?? 0} attempts`],
    ['B: endpoint', `${neighbour.endpoint_requests} requests, at most ${neighbour.endpoint_max_open_requests} open at once, ${neighbour.endpoint_tls_connections} TLS connections`],
    ['lost / invalid signatures / publish errors', `${result.lost} / ${result.invalid_signatures} / ${result.publish_errors}`],
    ['json', files.json],
    ['chart', files.svg],
  ]);
  const step = Math.max(1, Math.ceil(neighbour.samples.length / 20));
  console.log(`\nB's deliveries over the run (${step > 1 ? `one sample in ${step}, ` : ''}every ${neighbour.sample_every_s} s)`);
  for (const [i, sample] of neighbour.samples.entries()) {
    if (i % step !== 0 && i !== neighbour.samples.length - 1) continue;
    const own = sample.progress ? `  ${formatProgress(sample)}` : '';
    console.log(
      `${`${sample.t} s`.padStart(8)}  ${sample.stage.padEnd(8)}  ${formatStatuses(sample).padEnd(72)}  attempts ${String(sample.attempts).padStart(5)}  open ${sample.open_requests_peak}${own}`,
    );
  }
  printMarkdownRow(result);
}

/** The machine's busy cores in a phase, as the report prints them: "1.2 of 2". */
const busyCores = (phase: PhaseResult, result: NeighbourResult) => `${phase.machine_busy_cores} of ${result.host.cpus}`;

/** The run as a row of docs/performance.md's noisy-neighbour tables, with their header. */
function printMarkdownRow(result: NeighbourResult): void {
  const { alone, beside, neighbour } = result;
  const bound = (figures: DeliveryFigures) => (figures.latency_is_lower_bound ? '≥ ' : '');
  // As the page writes them: 23.2, 1,234.
  const figure = (value: number) => (value >= 1000 ? Math.round(value).toLocaleString('en-US') : String(value));
  const ms = (figures: DeliveryFigures) => (['p50', 'p99', 'max'] as const).map((key) => `${bound(figures)}${figure(figures.latency_ms[key])}`).join(' / ');
  const met = result.p99_ratio <= 2 && !beside.latency_is_lower_bound && result.lost === 0 && beside.late === 0;
  const last = neighbour.samples.at(-1);
  const load = [
    neighbour.description,
    ...Object.entries(neighbour.report).map(([label, value]) => `${label.replace(/^B: /, '')}: ${value}`),
    ...(neighbour.accepted_deliveries ? [`accepted deliveries: ${landed(neighbour.accepted_deliveries)}, p99 ${bound(neighbour.accepted_deliveries)}${figure(neighbour.accepted_deliveries.latency_ms.p99)} ms`] : []),
  ].join('; ');
  const cells = [
    `${neighbour.scenario}, ${result.mode}`,
    ms(alone),
    ms(beside),
    `**${bound(beside)}${figure(result.p99_ratio)}** (${met ? 'met' : 'not met'})`,
    `${alone.late + beside.late} / ${result.lost}`,
    load,
    `${formatStatuses(last)}; ${last?.attempts ?? 0} attempts, ${neighbour.endpoint_requests} requests at its endpoint`,
    `${neighbour.endpoint_max_open_requests} (at the end: ${last?.open_requests_peak ?? 0})`,
    `${busyCores(alone, result)} / ${busyCores(beside, result)}`,
  ];
  console.log('\nFor docs/performance.md:\n');
  console.log("| Scenario, topology | A alone: p50 / p99 / max ms | A beside B: p50 / p99 / max ms | p99 ratio (target ≤ 2) | A late / lost | B's load | B's deliveries at the end | most requests open at B's endpoint | cores busy: alone / beside |");
  console.log('|---|---|---|---|---|---|---|---|---|');
  console.log(`| ${cells.map((cell) => cell.replace(/\|/g, '\\|')).join(' | ')} |`);
}

/** B's own counts over the run (a panel of the chart), when the scenario has any. */
function progressPanel(samples: NeighbourSample[]): Panel[] {
  const names = [...new Set(samples.flatMap((sample) => Object.keys(sample.progress ?? {})))];
  if (names.length === 0) return [];
  return [
    {
      title: "B's own counts (cumulative)",
      yLabel: 'count',
      series: names.map((name, i) => ({
        name,
        color: PROGRESS_COLORS[i % PROGRESS_COLORS.length]!,
        points: samples.filter((s) => s.progress).map((s) => [s.t, s.progress![name] ?? 0] as [number, number]),
      })),
    },
  ];
}

/** A's latency and deliveries per second over both phases, B's deliveries by status and own counts, and the requests open at B's endpoint. */
export function renderNeighbourChart(result: NeighbourResult, markers: ChartSpec['markers']): string {
  const { alone, beside, neighbour, timeline } = result;
  const samples = neighbour.samples;
  const names = inOrder(samples.flatMap((sample) => Object.keys(sample.statuses)));
  return renderChart({
    title: `Noisy neighbour, ${neighbour.scenario} (${result.mode}): A at ${result.offered_rate}/s alone, then beside ${neighbour.description}`,
    subtitle: [
      `A alone p50 ${alone.latency_ms.p50} / p99 ${alone.latency_ms.p99} ms · beside p50 ${beside.latency_ms.p50} / p99 ${beside.latency_ms.p99} ms${beside.latency_is_lower_bound ? ' (lower bounds: late deliveries)' : ''} · p99 ratio ${result.p99_ratio} (target ≤ 2) · A late ${alone.late + beside.late}, lost ${result.lost}`,
      `${result.date} · ${result.host.cpus} cores · A for ${result.duration_s} s in each phase, its endpoint on ${result.healthy_endpoint.host}, B's on ${neighbour.endpoint_host} · at most ${neighbour.endpoint_max_open_requests} requests open at once at B's endpoint`,
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
      ...progressPanel(samples),
      {
        title: "Requests open at B's endpoint (the most at once in each sample)",
        yLabel: 'requests',
        series: [{ name: 'open', color: '#d62728', points: samples.map((s) => [s.t, s.open_requests_peak] as [number, number]) }],
      },
    ],
  });
}
