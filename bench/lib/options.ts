/** The benchmark's command line: `npm run bench -- --help`. */
import { parseArgs } from 'node:util';
import { DEFAULT_HISTORY_SHARDS, DEFAULT_REPLICAS } from '../../src/local/cluster/topology.ts';
import type { Trust } from './stack.ts';

export const HELP = `npm run bench -- [options]

Load:
  --rate <n|max>        events per second offered, or max (closed loop, --concurrency in flight) [50]
  --duration <s>        seconds of publishing [60]
  --webhooks <n>        webhooks of the project, i.e. deliveries per event (fan-out) [1]
  --fail-ratio <0..1>   share of requests the receiver answers 500 [0]
  --fail-cap <n>        a delivery is failed at most n times, so it lands within one round of 5 attempts [3]
  --concurrency <n>     publish calls in flight with --rate max [48]
  --max-in-flight <n>   cap on publish calls in flight at a fixed rate (then the rate is not met) [512]
  --warmup <n>          events published and delivered before measuring (not counted) [20]
  --deadline <s>        after publishing, wait this long at most for the deliveries to land [180]
  --quick               smoke run: --duration 5 --rate 20 --warmup 5 unless given
  --alongside <command> a shell command started with the load window (e.g. the retention sweep); the result
                        gives the latency of deliveries published while it ran apart from the others

Output:
  --out <file.json>     results file; the chart is written next to it as .svg
                        [bench/results/<time>-<mode>-<rate>-w<n>.json]
  --label <text>        a name for the run, in the file name and the JSON
  Exit status: 0; 3 when a delivery was lost (or still queued at --deadline) or a signature
  did not verify; 1 on an error, 2 on a bad option.

Service:
  --tracing             tracing on: every service process exports its spans to a real OpenTelemetry
                        Collector (built by scripts/otel-collector.mjs, measured as the group
                        "collector") over OTLP/HTTP; compare cpu ms per delivery with a run without
  --cpu-prof            run the service with node --cpu-prof and summarise the profile (load window only)
  --prebuilt-bundle     build the workflow bundle first (as npm run build:workflows would, into the temp
                        dir) and start the worker with it, instead of bundling at start
  --trust <how>         how the service trusts the receiver's self-signed certificate: ca-file
                        (DELIVERY_CA_FILE, the sender's agent gets a ca option) or node-extra-ca
                        (NODE_EXTRA_CA_CERTS, no ca option: the code path of a public endpoint) [ca-file]
  --env KEY=VALUE       extra environment for the service (repeatable), e.g. --env DATABASE_POOL_MAX=20
  --keep                keep the temporary DATA_DIR and service log
  --warm-data-dir       start and stop the service once first (not measured), so the measured start finds
                        an initialised DATA_DIR like a second npm start (no initdb memory spike)
  --state-dir <dir>     where the temporary DATA_DIR goes [the OS temp dir]; /dev/shm = tmpfs, no fsync cost

Production topology:
  --cluster             run against \`npm run cluster -- up\` in the temporary DATA_DIR: PostgreSQL, the
                        Temporal server on it, ${DEFAULT_REPLICAS.api} API replicas (the publisher spreads its calls
                        over them) and the worker replicas, each process measured
  --workers <n>         worker replicas of --cluster [${DEFAULT_REPLICAS.worker}]
  --history-shards <n>  history shards of --cluster's Temporal server [${DEFAULT_HISTORY_SHARDS}]

Comparison backends (the bench starts them itself, so their CPU and memory are measured):
  --postgres            a throwaway local PostgreSQL (initdb in the temp dir) as DATABASE_URL;
                        also counts statements per delivery with pg_stat_statements
  --pg-setting k=v      a postgres -c setting for --postgres (repeatable)
  --own-temporal        a Temporal dev server started by the bench with the service's flags, as TEMPORAL_ADDRESS
  --temporal-arg <arg>  an extra dev-server argument (repeatable; implies --own-temporal),
                        e.g. --temporal-arg=--sqlite-pragma --temporal-arg=synchronous=OFF

Noisy neighbour:
  --noisy-neighbour     a healthy project A beside a neighbour B, on two destination hosts: A's receiver on
                        127.0.0.2, B's endpoint on 127.0.0.1. A alone at --rate [10] for --duration [60;
                        --quick 10] s, then B's load, then A again beside it; reports A's latency in both
                        phases, their p99 ratio and B's deliveries by status over the run, and prints a
                        Markdown table for docs/performance.md. --deadline [300] bounds each phase's wait:
                        A's deliveries still queued in the service then are late, not lost
  --neighbour-scenario <name>  what B does [hanging-webhook]:
      hanging-webhook   one webhook on an endpoint that holds every request (--neighbour-hold); B's burst
                        of --neighbour-events is accepted, then settles, before A's second phase
      many-webhooks     the same with one project of --neighbour-webhooks webhooks on one hanging endpoint
                        (one host:port, a path each): every event goes to every webhook
      many-projects     the same with --neighbour-projects projects of one webhook each on one hanging
                        endpoint (a path each); the events are spread round robin over the projects
      publish-flood     during A's second phase B publishes back to back on --neighbour-connections
                        connections, to a healthy endpoint of its own, at the configured publish quota
                        (A has one of its --rate); counts the events accepted and refused (429, with
                        Retry-After); every accepted one must be delivered (else lost)
      bulk-retry        B's --neighbour-events events are dead-lettered first: its endpoint answers 500
                        until they all are (--deadline s at most; the retry schedule and the circuit
                        breaker, its probes not spaced (CIRCUIT_BREAKER_PROBE_INTERVAL=0s), make that
                        about 10 attempts a second here); then it answers 200, and
                        --neighbour-operations bulk retries of B's dead letters start one after another
                        as A's second phase starts; reports their progress (a refused start, e.g. 409,
                        is recorded and the others go on)
      endpoint-recovery B publishes --neighbour-events events at --neighbour-rate to an endpoint that
                        answers 500 (its circuit breaker opens, its deliveries wait in line and in
                        their retry backoff); as A's second phase starts the endpoint answers 200
                        again, and B's backlog goes out beside A; the publish quota is kept (A and B
                        have one of their rates)
  --neighbour-events <n>  B's events: hanging-webhook [1000; --quick 200]; many-webhooks, each delivered to
                        every webhook [100; --quick 10: 3,000 / 300 deliveries]; many-projects, in all [3000,
                        i.e. 100 per project; --quick 300]; bulk-retry, dead-lettered first [300; --quick 40];
                        endpoint-recovery, published during the outage [600; --quick 60]
  --neighbour-rate <n>  B's events per second before A's second phase (not publish-flood) [200;
                        endpoint-recovery 10, which B is given as its own publish quota]
  --neighbour-hold <s>  how long B's hanging endpoint holds each request before answering 200 [45]; 0
                        answers at once (a healthy neighbour, the control run)
  --neighbour-settle <s>  the hanging scenarios: after B's burst is accepted, wait this long, then until
                        the machine is quiet (its CPU below 60% for 10 s, at most 180 s more), before
                        A's second phase, so that A meets B's deliveries queued, not B's burst being
                        taken in (that is --neighbour-scenario publish-flood's question) [20]; given,
                        exactly that long [--quick 5]
  --neighbour-webhooks <n>     many-webhooks: B's webhooks [30]
  --neighbour-projects <n>     many-projects: B's projects [30]
  --neighbour-connections <n>  publish-flood: B's publish calls in flight, each on its own connection [8]
  --neighbour-operations <n>   bulk-retry: bulk retry operations to start [4]

Ceiling:
  --ceiling             measure the send path alone: createSender + buildNotificationHeaders/Body,
                        no Temporal, no database, to the same receiver, for --duration seconds
  --ceiling-concurrency <n>  sends in flight [50]

DATABASE_URL / TEMPORAL_ADDRESS in the environment are passed to the service (mode "external").`;

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string' },
    duration: { type: 'string' },
    webhooks: { type: 'string', default: '1' },
    'fail-ratio': { type: 'string', default: '0' },
    'fail-cap': { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '48' },
    'max-in-flight': { type: 'string', default: '512' },
    warmup: { type: 'string' },
    deadline: { type: 'string' },
    quick: { type: 'boolean', default: false },
    alongside: { type: 'string' },
    out: { type: 'string' },
    label: { type: 'string' },
    'cpu-prof': { type: 'boolean', default: false },
    'prebuilt-bundle': { type: 'boolean', default: false },
    tracing: { type: 'boolean', default: false },
    env: { type: 'string', multiple: true, default: [] },
    trust: { type: 'string', default: 'ca-file' },
    'state-dir': { type: 'string' },
    cluster: { type: 'boolean', default: false },
    workers: { type: 'string' },
    'history-shards': { type: 'string' },
    postgres: { type: 'boolean', default: false },
    'pg-setting': { type: 'string', multiple: true, default: [] },
    'own-temporal': { type: 'boolean', default: false },
    'warm-data-dir': { type: 'boolean', default: false },
    'temporal-arg': { type: 'string', multiple: true, default: [] },
    keep: { type: 'boolean', default: false },
    ceiling: { type: 'boolean', default: false },
    'noisy-neighbour': { type: 'boolean', default: false },
    'neighbour-events': { type: 'string' },
    'neighbour-rate': { type: 'string' },
    'neighbour-hold': { type: 'string' },
    'neighbour-settle': { type: 'string' },
    'neighbour-scenario': { type: 'string' },
    'neighbour-webhooks': { type: 'string' },
    'neighbour-projects': { type: 'string' },
    'neighbour-connections': { type: 'string' },
    'neighbour-operations': { type: 'string' },
    'ceiling-concurrency': { type: 'string', default: '50' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  console.log(HELP);
  process.exit(0);
}

function usageError(message: string): never {
  console.error(message);
  process.exit(2);
}

function numberArg(name: string, value: string | undefined, fallback: number, min: number, max = Infinity): number {
  const n = value === undefined ? fallback : Number(value);
  if (!Number.isFinite(n) || n < min || n > max) {
    usageError(`--${name} must be a number from ${min}${max < Infinity ? ` to ${max}` : ''}, got ${value}`);
  }
  return n;
}

const quick = args.quick;
const noisy = args['noisy-neighbour'];
const rateArg = args.rate ?? (noisy ? '10' : quick ? '20' : '50');
if (args.trust !== 'ca-file' && args.trust !== 'node-extra-ca') usageError(`--trust must be ca-file or node-extra-ca, got ${args.trust}`);
if (args.cluster && (args.postgres || args['own-temporal'] || args['temporal-arg']?.length)) {
  usageError('--cluster brings its own PostgreSQL and Temporal server: drop --postgres, --own-temporal and --temporal-arg');
}
if (args.cluster && args['cpu-prof']) usageError('--cpu-prof profiles the one service process: not with --cluster');
if (noisy && (rateArg === 'max' || args.webhooks !== '1' || args['fail-ratio'] !== '0' || args.alongside || args.ceiling || args['cpu-prof'])) {
  usageError('--noisy-neighbour takes a fixed --rate, one webhook per project, and none of --fail-ratio, --alongside, --ceiling, --cpu-prof');
}
const neighbourArgs = Object.keys(args).filter((name) => name.startsWith('neighbour-') && args[name as keyof typeof args] !== undefined);
if (!noisy && neighbourArgs.length > 0) usageError('--neighbour-* go with --noisy-neighbour');
if (args.tracing && (args.ceiling || noisy)) usageError('--tracing measures a system run: not with --ceiling or --noisy-neighbour');
if (!args.cluster && (args.workers !== undefined || args['history-shards'] !== undefined)) usageError('--workers and --history-shards go with --cluster');

/** The neighbours of `--noisy-neighbour` (bench/lib/neighbours.ts). */
export const NEIGHBOUR_SCENARIOS = ['hanging-webhook', 'many-webhooks', 'many-projects', 'publish-flood', 'bulk-retry', 'endpoint-recovery'] as const;
export type NeighbourScenario = (typeof NEIGHBOUR_SCENARIOS)[number];

/** The --neighbour-* options each scenario takes (the others are refused), its --neighbour-events [full, --quick] and --neighbour-rate (200 unless given). */
const NEIGHBOUR_SHAPES: Record<NeighbourScenario, { takes: readonly string[]; events: readonly [number, number]; rate?: number }> = {
  'hanging-webhook': { takes: ['events', 'rate', 'hold', 'settle'], events: [1000, 200] },
  'many-webhooks': { takes: ['events', 'rate', 'hold', 'settle', 'webhooks'], events: [100, 10] },
  'many-projects': { takes: ['events', 'rate', 'hold', 'settle', 'projects'], events: [3000, 300] },
  'publish-flood': { takes: ['connections'], events: [0, 0] },
  'bulk-retry': { takes: ['events', 'rate', 'operations'], events: [300, 40] },
  'endpoint-recovery': { takes: ['events', 'rate'], events: [600, 60], rate: 10 },
};

/** The validated settings of `--noisy-neighbour`'s scenario. */
function neighbourSettings() {
  const scenario = (args['neighbour-scenario'] ?? 'hanging-webhook') as NeighbourScenario;
  const shape = NEIGHBOUR_SHAPES[scenario];
  if (!shape) usageError(`--neighbour-scenario must be one of ${NEIGHBOUR_SCENARIOS.join(', ')}, got ${scenario}`);
  const refused = neighbourArgs.filter((name) => name !== 'neighbour-scenario' && !shape.takes.includes(name.slice('neighbour-'.length)));
  if (refused.length > 0) usageError(`--neighbour-scenario ${scenario} does not take ${refused.map((name) => `--${name}`).join(', ')}`);
  return {
    scenario,
    events: numberArg('neighbour-events', args['neighbour-events'], shape.events[quick ? 1 : 0], shape.events[0] > 0 ? 1 : 0),
    rate: numberArg('neighbour-rate', args['neighbour-rate'], shape.rate ?? 200, 0.1),
    holdS: numberArg('neighbour-hold', args['neighbour-hold'], 45, 0),
    settleS: numberArg('neighbour-settle', args['neighbour-settle'], quick ? 5 : 20, 0),
    /** Settle until the machine is quiet too: the default of a full run. */
    settleUntilQuiet: args['neighbour-settle'] === undefined && !quick,
    webhooks: numberArg('neighbour-webhooks', args['neighbour-webhooks'], 30, 1, 1000),
    projects: numberArg('neighbour-projects', args['neighbour-projects'], 30, 1, 1000),
    connections: numberArg('neighbour-connections', args['neighbour-connections'], 8, 1, 512),
    operations: numberArg('neighbour-operations', args['neighbour-operations'], 4, 1, 100),
  };
}

/** The settings of the noisy-neighbour run. */
export type NeighbourSettings = ReturnType<typeof neighbourSettings>;

/** The options of this run, validated. */
export const options = {
  maxRate: rateArg === 'max',
  rate: rateArg === 'max' ? 0 : numberArg('rate', rateArg, 50, 0.1),
  duration: numberArg('duration', args.duration, quick ? (noisy ? 10 : 5) : args.ceiling ? 20 : 60, 1),
  webhookCount: numberArg('webhooks', args.webhooks, 1, 1, 1000),
  failRatio: numberArg('fail-ratio', args['fail-ratio'], 0, 0, 1),
  failCap: numberArg('fail-cap', args['fail-cap'], 3, 0),
  concurrency: numberArg('concurrency', args.concurrency, 48, 1, 4096),
  maxInFlight: numberArg('max-in-flight', args['max-in-flight'], 512, 1),
  warmupEvents: numberArg('warmup', args.warmup, quick ? 5 : 20, 0),
  deadlineS: numberArg('deadline', args.deadline, noisy ? 300 : 180, 1),
  ceilingConcurrency: numberArg('ceiling-concurrency', args['ceiling-concurrency'], 50, 1),
  trust: args.trust as Trust,
  extraEnv: Object.fromEntries(
    (args.env ?? []).map((pair) => {
      const at = pair.indexOf('=');
      if (at <= 0) usageError(`--env wants KEY=VALUE, got ${pair}`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  ) as Record<string, string>,
  cluster: args.cluster
    ? {
        workers: numberArg('workers', args.workers, DEFAULT_REPLICAS.worker, 1, 16),
        historyShards: numberArg('history-shards', args['history-shards'], DEFAULT_HISTORY_SHARDS, 1, 16_384),
      }
    : undefined,
  alongside: args.alongside,
  out: args.out,
  label: args.label,
  cpuProf: args['cpu-prof'],
  prebuiltBundle: args['prebuilt-bundle'],
  tracing: args.tracing,
  stateDir: args['state-dir'],
  postgres: args.postgres,
  pgSettings: args['pg-setting'] ?? [],
  ownTemporal: args['own-temporal'] || (args['temporal-arg'] ?? []).length > 0,
  temporalArgs: args['temporal-arg'] ?? [],
  warmDataDir: args['warm-data-dir'],
  keep: args.keep,
  ceiling: args.ceiling,
  /** The noisy-neighbour run (bench/noisy-neighbour.ts), when asked for. */
  neighbour: noisy ? neighbourSettings() : undefined,
};
