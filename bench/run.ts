/**
 * The delivery benchmark: `npm run bench -- [options]`. See `--help` and docs/performance.md.
 *
 * It starts the service as a child process (embedded: PGlite + Temporal dev server, or the
 * DATABASE_URL / TEMPORAL_ADDRESS of its environment), an HTTPS receiver in another process,
 * creates the webhooks, publishes events through the producers' door at an offered rate for a
 * duration, waits for every delivery to land (or a deadline), and reports throughput, latency,
 * memory and CPU as a table, a JSON file and an SVG chart. `--ceiling` measures the send path
 * alone (no Temporal, no database) against the same receiver.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { localCertificate } from '../src/cli/certificate.ts';
import { openDatabase } from '../src/db/client.ts';
import { createApiKey } from '../src/db/queries/api-keys.ts';
import type { CeilingOptions, FromCeiling } from './ceiling-sender.ts';
import { renderChart, type Panel, type Series } from './lib/chart.ts';
import { docauthData } from '../test/support/event-data.ts';
import {
  processTree,
  ProcessSampler,
  threadCpu,
  threadCpuDelta,
  type ProcessGroup,
  type ProcStat,
} from './lib/procstat.ts';
import { startReceiver } from './lib/receiver-client.ts';
import { dataDirOf, embeddedPids, killGroup, REPO_ROOT, startStack, type Stack, type Trust } from './lib/stack.ts';
import {
  readStatementStats,
  resetStatementStats,
  startOwnPostgres,
  startOwnTemporal,
  type OwnBackend,
  type StatementStats,
} from './lib/backends.ts';
import { peakThroughput, percentiles, perSecond, round, sustainedThroughput, type Percentiles } from './lib/stats.ts';
import type { ReceiverBatch } from './receiver.ts';
import { costPerDelivery, metricsUrlFromLog, scrape, type MetricSnapshot } from './lib/temporal-metrics.ts';
import { formatSummary, summarise, type ProfileSummary } from './profile-summary.ts';

const HELP = `npm run bench -- [options]

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

Output:
  --out <file.json>     results file; the chart is written next to it as .svg
                        [bench/results/<time>-<mode>-<rate>-w<n>.json]
  --label <text>        a name for the run, in the file name and the JSON
  Exit status: 0; 3 when a delivery was lost (or still queued at --deadline) or a signature
  did not verify; 1 on an error, 2 on a bad option.

Service:
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

Comparison backends (the bench starts them itself, so their CPU and memory are measured):
  --postgres            a throwaway local PostgreSQL (initdb in the temp dir) as DATABASE_URL;
                        also counts statements per delivery with pg_stat_statements
  --pg-setting k=v      a postgres -c setting for --postgres (repeatable)
  --own-temporal        a Temporal dev server started by the bench with the service's flags, as TEMPORAL_ADDRESS
  --temporal-arg <arg>  an extra dev-server argument (repeatable; implies --own-temporal),
                        e.g. --temporal-arg=--sqlite-pragma --temporal-arg=synchronous=OFF

Ceiling:
  --ceiling             measure the send path alone: createSender + buildNotificationHeaders/Body,
                        no Temporal, no database, to the same receiver, for --duration seconds
  --ceiling-concurrency <n>  sends in flight [50, the sender's sockets per host]

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
    deadline: { type: 'string', default: '180' },
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
    label: { type: 'string' },
    'cpu-prof': { type: 'boolean', default: false },
    'prebuilt-bundle': { type: 'boolean', default: false },
    env: { type: 'string', multiple: true, default: [] },
    trust: { type: 'string', default: 'ca-file' },
    'state-dir': { type: 'string' },
    postgres: { type: 'boolean', default: false },
    'pg-setting': { type: 'string', multiple: true, default: [] },
    'own-temporal': { type: 'boolean', default: false },
    'warm-data-dir': { type: 'boolean', default: false },
    'temporal-arg': { type: 'string', multiple: true, default: [] },
    keep: { type: 'boolean', default: false },
    ceiling: { type: 'boolean', default: false },
    'ceiling-concurrency': { type: 'string', default: '50' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  console.log(HELP);
  process.exit(0);
}

function numberArg(name: string, value: string | undefined, fallback: number, min: number, max = Infinity): number {
  const n = value === undefined ? fallback : Number(value);
  if (!Number.isFinite(n) || n < min || n > max) {
    console.error(`--${name} must be a number from ${min}${max < Infinity ? ` to ${max}` : ''}, got ${value}`);
    process.exit(2);
  }
  return n;
}

const quick = args.quick;
const rateArg = args.rate ?? (quick ? '20' : '50');
const maxRate = rateArg === 'max';
const rate = maxRate ? 0 : numberArg('rate', rateArg, 50, 0.1);
const duration = numberArg('duration', args.duration, quick ? 5 : args.ceiling ? 20 : 60, 1);
const webhookCount = numberArg('webhooks', args.webhooks, 1, 1, 1000);
const failRatio = numberArg('fail-ratio', args['fail-ratio'], 0, 0, 1);
const failCap = numberArg('fail-cap', args['fail-cap'], 3, 0);
const concurrency = numberArg('concurrency', args.concurrency, 48, 1, 4096);
const maxInFlight = numberArg('max-in-flight', args['max-in-flight'], 512, 1);
const warmupEvents = numberArg('warmup', args.warmup, quick ? 5 : 20, 0);
const deadlineS = numberArg('deadline', args.deadline, 180, 1);
if (args.trust !== 'ca-file' && args.trust !== 'node-extra-ca') {
  console.error(`--trust must be ca-file or node-extra-ca, got ${args.trust}`);
  process.exit(2);
}
const trust = args.trust as Trust;
const extraEnv = Object.fromEntries(
  (args.env ?? []).map((pair) => {
    const at = pair.indexOf('=');
    if (at <= 0) {
      console.error(`--env wants KEY=VALUE, got ${pair}`);
      process.exit(2);
    }
    return [pair.slice(0, at), pair.slice(at + 1)];
  }),
);

// ---------------------------------------------------------------------------------------------
// Lifecycle: everything started is stopped on exit, on errors and on Ctrl-C.

const cleanups: (() => Promise<unknown>)[] = [];
const groupsToKill = new Set<number>();
let interrupted = false;
const workDir = mkdtempSync(path.join(args['state-dir'] ? path.resolve(args['state-dir']) : os.tmpdir(), 'webhook-bench-'));

async function cleanup(): Promise<void> {
  while (cleanups.length > 0) {
    const step = cleanups.pop()!;
    await step().catch((error: unknown) => console.error('cleanup:', error));
  }
  if (!args.keep) rmSync(workDir, { recursive: true, force: true });
  else console.error(`kept ${workDir}`);
}
process.on('exit', () => {
  // Last resort (an exit without cleanup): no child outlives the bench.
  for (const pid of groupsToKill) killGroup(pid, 'SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) {
      console.error('\nforced exit');
      process.exit(130);
    }
    interrupted = true;
    console.error(`\n${signal}: stopping the service and the receiver (again to force)...`);
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Helpers

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function loadAverage(): string {
  try {
    return execFileSync('uptime', { encoding: 'utf8' }).trim();
  } catch {
    return os.loadavg().map((v) => v.toFixed(2)).join(', ');
  }
}

function hostInfo() {
  return {
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? 'unknown',
    memory_gb: round(os.totalmem() / 1024 ** 3, 1),
    node: process.version,
    kernel: os.release(),
  };
}

function stamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

function outputPaths(defaultName: string): { json: string; svg: string } {
  const json = args.out ? path.resolve(args.out) : path.join(REPO_ROOT, 'bench', 'results', `${defaultName}.json`);
  mkdirSync(path.dirname(json), { recursive: true });
  return { json, svg: json.replace(/\.json$/i, '') + '.svg' };
}

const isTty = process.stderr.isTTY;
let lastProgressLine = 0;
function progress(line: string, force = false): void {
  if (isTty) {
    process.stderr.write(`\r\x1b[2K${line}`);
  } else if (force || Date.now() - lastProgressLine >= 5_000) {
    process.stderr.write(`${line}\n`);
    lastProgressLine = Date.now();
  }
}
function endProgress(): void {
  if (isTty) process.stderr.write('\n');
}

function printTable(title: string, rows: [string, string | number][]): void {
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`\n${title}`);
  console.log('-'.repeat(Math.min(100, title.length)));
  for (const [key, value] of rows) console.log(`${key.padEnd(width)}  ${value}`);
}

const fmtP = (p: Percentiles) => `p50 ${p.p50}  p95 ${p.p95}  p99 ${p.p99}  max ${p.max}`;

/** A self-signed certificate for 127.0.0.1, shared by the receiver (key) and the service (CA). */
function makeCertificate() {
  return localCertificate(path.join(workDir, 'cert'), 2);
}

async function startBenchReceiver(onBatch: (batch: ReceiverBatch) => void, failRatioValue: number) {
  const certificate = makeCertificate();
  const receiver = await startReceiver(
    {
      keyFile: path.join(workDir, 'cert', 'key.pem'),
      certFile: certificate.certFile,
      failRatio: failRatioValue,
      failCap,
    },
    onBatch,
  );
  groupsToKill.add(receiver.pid);
  cleanups.push(() => receiver.stop());
  return { receiver, certFile: certificate.certFile };
}

/** CPU seconds of each group between two samples, and average cores used. */
function cpuBetween(sampler: ProcessSampler, from: number, to: number) {
  const a = sampler.at(from)!;
  const b = sampler.at(to)!;
  const seconds = Math.max(0.001, (b.t - a.t) / 1000);
  const cpu: Record<string, number> = {};
  const cores: Record<string, number> = {};
  for (const name of Object.keys(b.groups)) {
    const delta = (b.groups[name]?.cpuSeconds ?? 0) - (a.groups[name]?.cpuSeconds ?? 0);
    cpu[name] = round(delta, 2);
    cores[name] = round(delta / seconds, 2);
  }
  return { cpu, cores, seconds: round(seconds, 1) };
}

/** Per-second CPU (cores) and RSS of each group from the sampler, relative to `origin`. */
function resourceSeries(sampler: ProcessSampler, origin: number, groups: string[], end = Infinity) {
  const cpu: Record<string, [number, number][]> = {};
  const rss: Record<string, [number, number][]> = {};
  for (const name of groups) {
    cpu[name] = [];
    rss[name] = [];
  }
  const samples = sampler.samples.filter((s) => s.t >= origin - 1000 && s.t <= end + 600);
  for (let i = 1; i < samples.length; i += 1) {
    const prev = samples[i - 1]!;
    const cur = samples[i]!;
    const dt = (cur.t - prev.t) / 1000;
    if (dt <= 0) continue;
    const x = (cur.t - origin) / 1000;
    if (x < 0) continue;
    for (const name of groups) {
      const c = ((cur.groups[name]?.cpuSeconds ?? 0) - (prev.groups[name]?.cpuSeconds ?? 0)) / dt;
      cpu[name]!.push([round(x, 2), round(c, 2)]);
      rss[name]!.push([round(x, 2), round(cur.groups[name]?.rssMb ?? 0, 1)]);
    }
  }
  return { cpu, rss };
}

const GROUP_COLORS: Record<string, string> = {
  service: '#1f77b4',
  temporal: '#d62728',
  postgres: '#8c564b',
  pglite: '#8c564b',
  receiver: '#2ca02c',
  bench: '#9467bd',
  sender: '#ff7f0e',
  helpers: '#bcbd22',
  other: '#7f7f7f',
};

// ---------------------------------------------------------------------------------------------
// The ceiling: the send path alone.

async function runCeiling(): Promise<Outcome> {
  const loadBefore = loadAverage();
  const ceilingConcurrency = numberArg('ceiling-concurrency', args['ceiling-concurrency'], 50, 1);
  const starts = new Map<string, number>();
  const pending = new Map<string, number>();
  const landings: { t: number; latency: number }[] = [];
  const sendMs: number[] = [];
  const startTimes: number[] = [];
  let sendFailures = 0;
  const land = (id: string, t: number) => {
    const start = starts.get(id);
    if (start === undefined) pending.set(id, t);
    else landings.push({ t, latency: t - start });
  };
  const { receiver, certFile } = await startBenchReceiver((batch) => {
    for (let i = 0; i < batch.ids.length; i += 1) {
      if (batch.status[i] === 200 && batch.dup[i] === 0) land(batch.ids[i]!, batch.t[i]!);
    }
  }, 0);
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  receiver.setSecrets([secret]);

  const options: CeilingOptions = {
    url: `${receiver.url}/hooks/0`,
    caFile: certFile,
    secret,
    durationS: duration,
    concurrency: ceilingConcurrency,
    timeoutMs: 30_000,
    caOption: trust === 'ca-file',
  };
  const profileDir = args['cpu-prof'] ? path.join(REPO_ROOT, 'bench', 'results', 'profiles', `${stamp()}-ceiling`) : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const child: ChildProcess = fork(fileURLToPath(new URL('./ceiling-sender.ts', import.meta.url)), [JSON.stringify(options)], {
    execArgv: [...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), '--import', 'tsx'],
    env: trust === 'node-extra-ca' ? { ...process.env, NODE_EXTRA_CA_CERTS: certFile } : process.env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  groupsToKill.add(child.pid!);
  cleanups.push(async () => killGroup(child.pid, 'SIGKILL'));
  const sampler = new ProcessSampler([
    { name: 'sender', pids: () => [child.pid!] },
    { name: 'receiver', pids: () => [receiver.pid] },
    { name: 'bench', pids: () => [process.pid] },
  ]);
  sampler.phase = 'startup';
  sampler.start();
  let loadStart = now();
  let done: Extract<FromCeiling, { type: 'done' }> | undefined;
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const finished = new Promise<void>((resolve, reject) => {
    child.on('message', (message: FromCeiling) => {
      if (message.type === 'ready') {
        loadStart = message.t;
        sampler.phase = 'load';
        sampler.sample();
        markReady();
      } else if (message.type === 'starts') {
        for (let i = 0; i < message.ids.length; i += 1) {
          starts.set(message.ids[i]!, message.t[i]!);
          startTimes.push(message.t[i]!);
          sendMs.push(message.sendMs[i]!);
          const landed = pending.get(message.ids[i]!);
          if (landed !== undefined) {
            pending.delete(message.ids[i]!);
            landings.push({ t: landed, latency: landed - message.t[i]! });
          }
        }
        sendFailures += message.failed;
      } else if (message.type === 'done') {
        done = message;
        resolve();
      }
    });
    child.once('exit', (code) => (done ? resolve() : reject(new Error(`the ceiling sender exited (${code})`))));
  });
  process.stderr.write('ceiling: starting the sender and opening its connections (2 s warm-up)...\n');
  await Promise.race([ready, finished]);
  let lastCount = 0;
  const ticker = setInterval(() => {
    const elapsed = (now() - loadStart) / 1000;
    const count = landings.length;
    progress(`ceiling ${elapsed.toFixed(0)}s/${duration}s  delivered ${count}  rate ${count - lastCount}/s`);
    lastCount = count;
  }, 1000);
  await finished;
  clearInterval(ticker);
  await receiver.flush();
  const loadEnd = now();
  sampler.stop();
  endProgress();
  if (profileDir) {
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    const summary = summarise([profileDir], { top: 25 });
    writeFileSync(path.join(profileDir, 'summary.txt'), `${formatSummary(summary)}\n`);
    console.log(formatSummary(summary));
  }

  const counters = receiver.counters!;
  const bins = perSecond(loadStart, loadStart + duration * 1000, startTimes, landings);
  const steady = bins.slice(Math.min(2, Math.floor(bins.length / 4)));
  const throughput = steady.reduce((sum, bin) => sum + bin.delivered, 0) / Math.max(1, steady.length);
  const usage = cpuBetween(sampler, loadStart, loadEnd);
  const result = {
    mode: 'ceiling',
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    host: { ...hostInfo(), load_before: loadBefore, load_after: loadAverage() },
    offered_rate: 'max',
    duration_s: duration,
    concurrency: ceilingConcurrency,
    trust,
    webhooks: 1,
    fail_ratio: 0,
    published: done?.sent ?? 0,
    delivered: landings.length,
    lost: (done?.sent ?? 0) - landings.length,
    send_failures: sendFailures,
    duplicates: counters.duplicates,
    invalid_signatures: counters.invalidSignatures,
    tls_connections: counters.tlsConnections,
    throughput_dps: round(throughput, 1),
    throughput_overall_dps: round(landings.length / ((loadEnd - loadStart) / 1000), 1),
    latency_ms: percentiles(landings.map((l) => l.latency)),
    send_ms: percentiles(sendMs),
    rss_mb: { sender: round(sampler.maxRss('sender'), 1), receiver: round(sampler.maxRss('receiver'), 1) },
    cpu_s: usage.cpu,
    cpu_cores: usage.cores,
    cpu_per_delivery_ms: {
      sender: round((usage.cpu['sender']! * 1000) / Math.max(1, landings.length), 3),
      receiver: round((usage.cpu['receiver']! * 1000) / Math.max(1, landings.length), 3),
    },
    errors: done?.errors ?? [],
    timeline: bins,
  };
  const files = outputPaths([stamp(), 'ceiling', trust === 'ca-file' ? '' : trust, args.label ?? ''].filter(Boolean).join('-'));
  const res = resourceSeries(sampler, loadStart, ['sender', 'receiver', 'bench'], loadEnd);
  writeFileSync(files.json, `${JSON.stringify({ ...result, chart: path.relative(REPO_ROOT, files.svg) }, null, 2)}\n`);
  writeFileSync(
    files.svg,
    renderChart({
      title: `Ceiling: signed sends per second, no Temporal, no database (${ceilingConcurrency} in flight)`,
      subtitle: [
        `${result.throughput_dps} deliveries/s sustained · latency p50 ${result.latency_ms.p50} ms, p99 ${result.latency_ms.p99} ms · trust: ${trust}`,
        `${result.date} · ${result.host.cpus} cores · load average before: ${loadBefore.replace(/^.*load average: /, '')}`,
      ],
      xMax: duration,
      markers: [],
      panels: [
        {
          title: 'Throughput (deliveries landed per second)',
          yLabel: 'deliveries/s',
          series: [{ name: 'delivered/s', color: '#1f77b4', points: bins.map((b) => [b.t + 0.5, b.delivered]) }],
        },
        latencyPanel(bins),
        cpuPanel(res.cpu),
      ],
    }),
  );
  printTable('Ceiling (send path alone)', [
    ['sent', result.published],
    ['delivered', result.delivered],
    ['lost', result.lost],
    ['duplicates', result.duplicates],
    ['invalid_signatures', result.invalid_signatures],
    ['throughput_dps', result.throughput_dps],
    ['latency_ms', fmtP(result.latency_ms)],
    ['cpu_cores (sender/receiver)', `${result.cpu_cores['sender']} / ${result.cpu_cores['receiver']}`],
    ['cpu ms per delivery (sender/receiver)', `${result.cpu_per_delivery_ms.sender} / ${result.cpu_per_delivery_ms.receiver}`],
    ['rss_mb (sender/receiver)', `${result.rss_mb.sender} / ${result.rss_mb.receiver}`],
    ['tls connections', result.tls_connections],
    ['load before', loadBefore],
    ['json', files.json],
    ['chart', files.svg],
  ]);
  return result;
}

function latencyPanel(bins: ReturnType<typeof perSecond>): Panel {
  const pick = (key: 'p50' | 'p95' | 'p99') =>
    bins.filter((b) => b.latency).map((b) => [b.t + 0.5, b.latency![key]] as [number, number]);
  return {
    title: 'Latency of the deliveries that landed in each second (publish call started → receiver got the POST)',
    yLabel: 'ms (log scale)',
    log: true,
    series: [
      { name: 'p50', color: '#2ca02c', points: pick('p50') },
      { name: 'p95', color: '#ff7f0e', points: pick('p95') },
      { name: 'p99', color: '#d62728', points: pick('p99') },
    ],
  };
}

function cpuPanel(cpu: Record<string, [number, number][]>, elu?: [number, number][]): Panel {
  return {
    title: 'CPU by process (cores; the machine has ' + os.cpus().length + '; "other" = processes outside the benchmark)',
    yLabel: 'cores',
    series: [
      ...Object.entries(cpu)
        .filter(([, points]) => points.some((p) => p[1] > 0.01))
        .map(([name, points]): Series => ({ name, color: GROUP_COLORS[name] ?? '#333', points, ...(name === 'other' ? { dash: '4 3' } : {}) })),
      ...(elu && elu.length ? [{ name: 'service event loop busy (0-1)', color: '#17becf', dash: '2 2', points: elu }] : []),
    ],
    refs: [{ y: os.cpus().length, label: 'all cores', color: '#000' }],
  };
}

// ---------------------------------------------------------------------------------------------
// The full system.

interface PublishResult {
  status: number;
  deliveryIds: string[];
  error?: string;
}

async function runSystem(): Promise<Outcome> {
  const loadBefore = loadAverage();
  const runId = randomBytes(4).toString('hex');
  const projectId = `bench-${runId}`;

  // Deliveries: publish start per delivery id, and landings (first 200 per id).
  const publishStart = new Map<string, number>();
  const pendingLandings = new Map<string, number>();
  const warmupIds = new Set<string>();
  let warmupLanded = 0;
  const landings: { t: number; latency: number }[] = [];
  const landed = new Set<string>();
  let unexpected = 0;
  const land = (id: string, t: number) => {
    if (warmupIds.has(id)) {
      warmupLanded += 1;
      return;
    }
    const start = publishStart.get(id);
    if (start === undefined) {
      pendingLandings.set(id, t);
      return;
    }
    landed.add(id);
    landings.push({ t, latency: t - start });
  };

  // 1. Receiver, 2. service.
  const { receiver, certFile } = await startBenchReceiver((batch) => {
    for (let i = 0; i < batch.ids.length; i += 1) {
      if (batch.status[i] === 200 && batch.dup[i] === 0) land(batch.ids[i]!, batch.t[i]!);
    }
  }, failRatio);

  let bundlePath: string | undefined;
  if (args['prebuilt-bundle']) {
    bundlePath = path.join(workDir, 'workflow-bundle.js');
    process.stderr.write('building the workflow bundle (npm run build:workflows into the temp dir)...\n');
    const env: NodeJS.ProcessEnv = { ...process.env, WORKFLOW_BUNDLE_PATH: bundlePath };
    if (env['NODE_OPTIONS']?.includes('tsx')) delete env['NODE_OPTIONS'];
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/bundle-workflows.ts'], { cwd: REPO_ROOT, env, stdio: 'inherit' });
  }

  const profileDir = args['cpu-prof'] ? path.join(REPO_ROOT, 'bench', 'results', 'profiles', `${stamp()}-${runId}`) : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--cpu-prof-interval=1000'] : [];

  let ownPostgres: OwnBackend | undefined;
  let ownTemporal: OwnBackend | undefined;
  if (args.postgres) {
    process.stderr.write('starting a throwaway PostgreSQL...\n');
    ownPostgres = await startOwnPostgres(workDir, args['pg-setting'] ?? []);
    const backend = ownPostgres;
    groupsToKill.add(backend.pid);
    cleanups.push(() => backend.stop());
  }
  const temporalArgs = args['temporal-arg'] ?? [];
  if (args['own-temporal'] || temporalArgs.length > 0) {
    process.stderr.write(`starting a Temporal dev server${temporalArgs.length ? ` with ${temporalArgs.join(' ')}` : ''}...\n`);
    ownTemporal = await startOwnTemporal(workDir, temporalArgs);
    const backend = ownTemporal;
    // In the bench's own process group (as the service runs it): a Ctrl-C reaches it too.
    cleanups.push(() => backend.stop());
  }
  const databaseUrl = ownPostgres?.url ?? process.env['DATABASE_URL'];
  const temporalAddress = ownTemporal?.url ?? process.env['TEMPORAL_ADDRESS'];

  let servicePid = 0;
  let stack: Stack | undefined;
  // From the DATA_DIR, not from `stack`: the service spawns them long before it is ready.
  const embedded = embeddedPids(dataDirOf(workDir));
  const temporalTree = (all: ProcStat[]) => {
    const pid = ownTemporal?.pid ?? embedded.temporalPid();
    return pid ? processTree(pid, all) : [];
  };
  const embeddedDatabaseTree = (all: ProcStat[]) => {
    const pid = embedded.databasePid();
    return pid ? processTree(pid, all) : [];
  };
  const external = Boolean(databaseUrl || temporalAddress);
  const groups: ProcessGroup[] = [
    {
      name: 'service',
      // The service's own process: the API and the worker (the budget of the RSS target).
      pids: () => (servicePid ? [servicePid] : []),
    },
    {
      name: 'helpers',
      // Short-lived children of the service (the workflow bundler at start), not the Temporal
      // server and not the embedded database's process.
      pids: (all) => {
        if (!servicePid) return [];
        const others = new Set([servicePid, ...temporalTree(all), ...embeddedDatabaseTree(all)]);
        return processTree(servicePid, all).filter((pid) => !others.has(pid));
      },
    },
    {
      name: 'temporal',
      pids: (all) => {
        const embedded = temporalTree(all);
        if (embedded.length > 0 || !temporalAddress) return embedded;
        // An external Temporal server on this machine, if there is one.
        return all.filter((p) => /^temporal/.test(p.comm)).map((p) => p.pid);
      },
    },
    { name: 'receiver', pids: () => [receiver.pid] },
    { name: 'bench', pids: () => [process.pid] },
  ];
  if (ownPostgres) {
    const root = ownPostgres.pid;
    groups.push({ name: 'postgres', pids: (all) => processTree(root, all) });
  } else if (!databaseUrl) {
    groups.push({ name: 'pglite', pids: embeddedDatabaseTree });
  } else {
    // Every local postgres process (server and backends); other databases' load counts too.
    groups.push({ name: 'postgres', pids: (all) => all.filter((p) => p.comm === 'postgres' || p.comm.startsWith('postgres:')).map((p) => p.pid) });
  }
  const sampler = new ProcessSampler(groups, 500);
  process.stderr.write(`starting the service (${external ? 'external' : 'embedded'} mode)...\n`);
  let spawnedAt = now();
  if (args['warm-data-dir']) {
    // A first start (not measured) initialises DATA_DIR, so the measured one is like a second
    // `npm start`: no initdb of the embedded database, no first-time Temporal schema.
    process.stderr.write('initialising DATA_DIR with a first start (not measured)...\n');
    const first = await startStack({ workDir, caFile: certFile, trust, nodeArgs: [], env: extraEnv, databaseUrl, temporalAddress, workflowBundlePath: bundlePath, onSpawn: (pid) => groupsToKill.add(pid) });
    await first.stop();
    spawnedAt = now();
  }
  stack = await startStack({
    workDir,
    caFile: certFile,
    trust,
    nodeArgs,
    env: extraEnv,
    databaseUrl,
    temporalAddress,
    workflowBundlePath: bundlePath,
    onSpawn: (pid) => {
      servicePid = pid;
      groupsToKill.add(pid);
      sampler.start();
    },
  });
  const serviceStack = stack;
  let serviceStopped = false;
  let exitStatus: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  cleanups.push(async () => {
    if (!serviceStopped) {
      serviceStopped = true;
      exitStatus = await serviceStack.stop();
    }
  });
  process.stderr.write(`service ready in ${(stack.startupMs / 1000).toFixed(1)} s (pid ${stack.pid}, temporal pid ${embedded.temporalPid() ?? '-'})\n`);

  // 3. API key (directly in the database, as `npm run cli -- keys create` does) and webhooks.
  const database = await openDatabase({ kind: 'postgres', url: stack.databaseUrl, poolMax: 1 });
  const { key, token } = await createApiKey(database.db, { projectId, services: ['webhooks'], name: 'bench' }).finally(() =>
    database.close(),
  );
  const secrets: string[] = [];
  for (let i = 0; i < webhookCount; i += 1) {
    const res = await fetch(`${stack.apiUrl}/api-gateway/v2/webhooks`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        api_key_id: key.id,
        url: `${receiver.url}/hooks/${i}`,
        events: ['docauth.completed'],
        headers: { 'X-Customer-Tag': 'bench' },
      }),
    });
    const body = (await res.json()) as { data?: { secret?: string }; error?: unknown };
    if (res.status !== 201 || !body.data?.secret) throw new Error(`creating webhook ${i} failed: ${res.status} ${JSON.stringify(body)}`);
    secrets.push(body.data.secret);
  }
  receiver.setSecrets(secrets);

  // 4. Publishing through the producers' door.
  const agent = new Agent({ keepAlive: true, maxSockets: Math.max(concurrency, 64) });
  const eventsUrl = new URL('/internal/v1/events', stack.apiUrl);
  const publishHeaders = { Authorization: `Bearer ${stack.producerToken}`, 'Content-Type': 'application/json' };
  const publish = (seq: number, idPrefix: string): Promise<PublishResult> =>
    new Promise((resolve) => {
      const body = JSON.stringify({ id: `${idPrefix}-${seq}`, project_id: projectId, event: 'docauth.completed', data: docauthData({ request_id: `req_bench_${seq}` }) });
      const req = request(
        eventsUrl,
        { method: 'POST', agent, headers: { ...publishHeaders, 'Content-Length': Buffer.byteLength(body) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== 202) {
              resolve({ status: res.statusCode ?? 0, deliveryIds: [], error: `${res.statusCode}: ${text.slice(0, 200)}` });
              return;
            }
            try {
              const parsed = JSON.parse(text) as { data: { delivery_ids: string[] } };
              resolve({ status: 202, deliveryIds: parsed.data.delivery_ids });
            } catch (error) {
              resolve({ status: 202, deliveryIds: [], error: `unparsable answer: ${String(error)}` });
            }
          });
          res.on('error', (error) => resolve({ status: 0, deliveryIds: [], error: String(error) }));
        },
      );
      req.on('error', (error) => resolve({ status: 0, deliveryIds: [], error: String(error) }));
      req.end(body);
    });

  // Warm-up: a few events, delivered before measuring (connections, JIT, workflow cache).
  sampler.phase = 'warmup';
  if (warmupEvents > 0) {
    process.stderr.write(`warm-up: ${warmupEvents} events...\n`);
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(4, warmupEvents) }, async () => {
        while (next < warmupEvents) {
          const result = await publish(next++, `warm-${runId}`);
          for (const id of result.deliveryIds) warmupIds.add(id);
        }
      }),
    );
    // Landings that raced their publish answer.
    for (const [id] of pendingLandings) if (warmupIds.has(id)) (pendingLandings.delete(id), (warmupLanded += 1));
    const warmDeadline = Date.now() + 60_000;
    while (warmupLanded < warmupIds.size && Date.now() < warmDeadline && !interrupted) await sleep(100);
  }

  // The measured run.
  const publishTimes: number[] = [];
  const publishDurations: number[] = [];
  const publishErrors: string[] = [];
  let publishErrorCount = 0;
  let expected = 0;
  let inFlight = 0;
  let deferred = 0;
  if (ownPostgres) await resetStatementStats(ownPostgres.url);
  const temporalMetricsUrl = ownTemporal?.metricsUrl ?? metricsUrlFromLog(path.join(stack.dataDir, 'temporal', 'temporal.log'));
  const temporalBefore: MetricSnapshot | undefined = temporalMetricsUrl ? await scrape(temporalMetricsUrl) : undefined;
  const threadsBefore = threadCpu(stack.pid);
  const databasePidDuringLoad = embedded.databasePid();
  sampler.phase = 'load';
  const loadStart = now();
  const loadStartHrUs = Number(process.hrtime.bigint() / 1000n);
  const loadEnd = loadStart + duration * 1000;
  const fire = async (seq: number): Promise<void> => {
    inFlight += 1;
    const started = now();
    publishTimes.push(started);
    const result = await publish(seq, `ev-${runId}`);
    publishDurations.push(now() - started);
    inFlight -= 1;
    if (result.error) {
      publishErrorCount += 1;
      if (publishErrors.length < 5) publishErrors.push(result.error);
    }
    for (const id of result.deliveryIds) {
      expected += 1;
      publishStart.set(id, started);
      const t = pendingLandings.get(id);
      if (t !== undefined) {
        pendingLandings.delete(id);
        landed.add(id);
        landings.push({ t, latency: t - started });
      }
    }
  };

  let lastDelivered = 0;
  let lastPublished = 0;
  const ticker = setInterval(() => {
    const elapsed = (now() - loadStart) / 1000;
    const delivered = landings.length;
    const phase = elapsed <= duration ? `${elapsed.toFixed(0)}s/${duration}s` : `draining ${(elapsed - duration).toFixed(0)}s`;
    progress(
      `${phase}  sent ${publishTimes.length} (${publishTimes.length - lastPublished}/s)  delivered ${delivered} (${delivered - lastDelivered}/s)  in flight ${expected - delivered + inFlight * webhookCount}${publishErrorCount ? `  publish errors ${publishErrorCount}` : ''}${receiver.counters?.injectedFailures ? `  500s ${receiver.counters.injectedFailures}` : ''}`,
    );
    lastDelivered = delivered;
    lastPublished = publishTimes.length;
  }, 1000);

  const running = new Set<Promise<void>>();
  if (maxRate) {
    let seq = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (now() < loadEnd && !interrupted) await fire(seq++);
      }),
    );
  } else {
    const total = Math.round(rate * duration);
    let seq = 0;
    while (seq < total && !interrupted) {
      const due = Math.min(total, Math.floor(((now() - loadStart) / 1000) * rate) + 1);
      while (seq < due) {
        if (inFlight >= maxInFlight) {
          deferred += 1;
          break;
        }
        const call = fire(seq++).finally(() => running.delete(call));
        running.add(call);
      }
      await sleep(Math.max(1, Math.min(10, 1000 / rate / 2)));
    }
    await Promise.all(running);
  }
  const publishEnd = now();
  sampler.phase = 'drain';

  // 5. Wait for every delivery to land, or the deadline.
  const drainDeadline = publishEnd + deadlineS * 1000;
  while (landings.length < expected && now() < drainDeadline && !interrupted) await sleep(100);
  await receiver.flush();
  const drainEnd = now();
  const loadEndHrUs = Number(process.hrtime.bigint() / 1000n);
  clearInterval(ticker);
  progress(
    `done: sent ${publishTimes.length}  delivered ${landings.length}/${expected}  in ${((drainEnd - loadStart) / 1000).toFixed(1)} s`,
    true,
  );
  endProgress();
  const threadsAfter = threadCpu(stack.pid);
  sampler.sample();
  const temporalAfter = temporalMetricsUrl && temporalBefore ? await scrape(temporalMetricsUrl) : undefined;
  const statements: StatementStats | undefined = ownPostgres ? await readStatementStats(ownPostgres.url).catch(() => undefined) : undefined;
  const usage = cpuBetween(sampler, loadStart, drainEnd);
  const usageLoad = cpuBetween(sampler, loadStart, publishEnd);
  const startupUsage = cpuBetween(sampler, spawnedAt, loadStart);
  unexpected = pendingLandings.size;

  // 6. Stop the service (profiles are written when it exits), then the receiver.
  sampler.phase = 'shutdown';
  const serviceRssEnd = sampler.samples.at(-1)?.groups['service']?.rssMb ?? 0;
  const stopStarted = now();
  serviceStopped = true;
  exitStatus = await stack.stop();
  const stopMs = now() - stopStarted;
  sampler.stop();
  const counters = receiver.counters!;

  let profile: ProfileSummary | undefined;
  if (profileDir) {
    const files = readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'));
    if (files.length > 0) {
      profile = summarise([profileDir], { top: 40, fromUs: loadStartHrUs, toUs: loadEndHrUs });
      const startup = summarise([profileDir], { top: 15, toUs: loadStartHrUs });
      writeFileSync(path.join(profileDir, 'summary-load.txt'), `${formatSummary(profile)}\n`);
      // One summary per process and thread as well (Node names them CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile).
      const byRole = new Map<string, string[]>();
      for (const file of files) {
        const [, , , pid, thread] = file.split('.');
        const role =
          Number(pid) === stack.pid
            ? thread === '0' ? 'service-main-thread' : `service-thread-${thread}`
            : Number(pid) === databasePidDuringLoad ? 'pglite' : `process-${pid}-thread-${thread}`;
        byRole.set(role, [...(byRole.get(role) ?? []), path.join(profileDir, file)]);
      }
      for (const [role, roleFiles] of byRole) {
        const summary = summarise(roleFiles, { top: 25, fromUs: loadStartHrUs, toUs: loadEndHrUs });
        writeFileSync(path.join(profileDir, `summary-load-${role}.txt`), `${formatSummary(summary)}\n`);
      }
      writeFileSync(path.join(profileDir, 'summary-startup.txt'), `${formatSummary(startup)}\n`);
      writeFileSync(path.join(profileDir, 'window.json'), JSON.stringify({ fromUs: loadStartHrUs, toUs: loadEndHrUs }));
    } else {
      console.error(`no .cpuprofile written in ${profileDir} (service exit: ${JSON.stringify(exitStatus)})`);
    }
  }

  // The service probe: memory by kind and event-loop load, once a second.
  interface ProbeLine {
    t: number;
    pid: number;
    thread: string;
    rss_mb: number;
    heap_used_mb: number;
    heap_total_mb: number;
    external_mb: number;
    array_buffers_mb: number;
    event_loop_utilization: number;
    event_loop_delay_ms: { p50: number; p99: number; max: number };
  }
  let probeLines: ProbeLine[] = [];
  try {
    probeLines = readFileSync(stack.probeFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as ProbeLine)
      .filter((line) => line.pid === stack.pid);
  } catch {
    // no probe output
  }
  const workerLines = probeLines.filter((line) => line.thread !== 'main');
  probeLines = probeLines.filter((line) => line.thread === 'main');
  const probeIn = (from: number, to: number) => probeLines.filter((line) => line.t >= from && line.t <= to);
  const workerThreads = {
    note: 'V8 isolates of worker threads (the Temporal workflow thread), max over the run',
    threads: [...new Set(workerLines.map((l) => l.thread))].length,
    max_heap_used_mb: workerLines.length ? Math.max(...workerLines.map((l) => l.heap_used_mb)) : 0,
    max_heap_total_mb: workerLines.length ? Math.max(...workerLines.map((l) => l.heap_total_mb)) : 0,
    max_external_mb: workerLines.length ? Math.max(...workerLines.map((l) => l.external_mb)) : 0,
  };
  const probeSummary = (lines: ProbeLine[]) =>
    lines.length === 0
      ? undefined
      : {
          samples: lines.length,
          max_heap_used_mb: Math.max(...lines.map((l) => l.heap_used_mb)),
          max_heap_total_mb: Math.max(...lines.map((l) => l.heap_total_mb)),
          max_external_mb: Math.max(...lines.map((l) => l.external_mb)),
          max_array_buffers_mb: Math.max(...lines.map((l) => l.array_buffers_mb)),
          event_loop_utilization_mean: round(lines.reduce((sum, l) => sum + l.event_loop_utilization, 0) / lines.length, 3),
          event_loop_utilization_max: Math.max(...lines.map((l) => l.event_loop_utilization)),
          event_loop_delay_p99_ms_max: Math.max(...lines.map((l) => l.event_loop_delay_ms.p99)),
          event_loop_delay_max_ms: Math.max(...lines.map((l) => l.event_loop_delay_ms.max)),
        };
  const serviceProbe = {
    startup: probeSummary(probeIn(spawnedAt - 1000, loadStart)),
    while_publishing: probeSummary(probeIn(loadStart, publishEnd + 500)),
    load_and_drain: probeSummary(probeIn(loadStart, drainEnd + 500)),
    worker_threads: workerThreads,
    note: 'main thread: heap = V8 heap of the API, activities and Temporal client; external = Buffers and native objects held from JavaScript',
  };
  const eluSeries: [number, number][] = probeIn(loadStart, drainEnd + 500).map((l) => [round((l.t - loadStart) / 1000, 2), l.event_loop_utilization]);

  // 7. Results.
  const bins = perSecond(loadStart, drainEnd, publishTimes, landings);
  const publishSeconds = Math.max(0.001, (publishEnd - loadStart) / 1000);
  // While publishing: the mean of the per-second counts, after the first 10% (ramp-up).
  const skip = Math.min(5, Math.floor(duration / 10));
  const publishingBins = bins.slice(skip, Math.max(skip + 1, Math.floor(publishSeconds)));
  const throughputWhilePublishing = publishingBins.reduce((sum, bin) => sum + bin.delivered, 0) / Math.max(1, publishingBins.length);
  const lastLanding = landings.reduce((max, l) => Math.max(max, l.t), loadStart);
  const groupNames = groups.map((g) => g.name);
  const rssMb: Record<string, unknown> = {};
  for (const name of groupNames) {
    rssMb[name] = {
      max: round(sampler.maxRss(name), 1),
      max_during_load: round(sampler.maxRss(name, ['load', 'drain']), 1),
      max_during_startup: round(sampler.maxRss(name, ['startup', 'warmup']), 1),
    };
  }
  (rssMb['service'] as Record<string, number>)['at_end_of_load'] = round(serviceRssEnd, 1);
  const oursCpu = groupNames.reduce((sum, name) => sum + (usage.cpu[name] ?? 0), 0);
  const otherCpu = round((usage.cpu['machine'] ?? 0) - oursCpu, 2);
  const delivered = landings.length;
  const result = {
    mode: stack.mode,
    label: args.label,
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    host: { ...hostInfo(), load_before: loadBefore, load_after: loadAverage() },
    offered_rate: maxRate ? 'max' : rate,
    duration_s: duration,
    webhooks: webhookCount,
    fail_ratio: failRatio,
    fail_cap: failCap,
    trust,
    concurrency: maxRate ? concurrency : undefined,
    published: publishTimes.length,
    publish_errors: publishErrorCount,
    publish_rate_eps: round(publishTimes.length / publishSeconds, 1),
    /** Scheduler ticks at which --max-in-flight publish calls were already open (the door was not keeping up). */
    publish_cap_stalls: deferred,
    deliveries_expected: expected,
    delivered,
    lost: expected - delivered,
    /** True when the bench stopped waiting at --deadline: then `lost` counts deliveries still queued, not dropped. */
    deadline_reached: expected - delivered > 0 && !interrupted,
    duplicates: counters.duplicates,
    invalid_signatures: counters.invalidSignatures,
    injected_failures: counters.injectedFailures,
    receiver_requests: counters.requests,
    unexpected_deliveries: unexpected,
    throughput_dps: round(sustainedThroughput(bins), 1),
    throughput_while_publishing_dps: round(throughputWhilePublishing, 1),
    throughput_peak_10s_dps: round(peakThroughput(bins), 1),
    throughput_overall_dps: round(delivered / Math.max(0.001, (lastLanding - loadStart) / 1000), 1),
    drain_s: round((lastLanding - publishEnd) / 1000, 1),
    latency_ms: percentiles(landings.map((l) => l.latency)),
    publish_ms: percentiles(publishDurations),
    rss_mb: rssMb,
    cpu_s: Object.fromEntries(groupNames.map((name) => [name, usage.cpu[name] ?? 0]).concat([['other_processes', otherCpu]])),
    cpu_cores_while_publishing: Object.fromEntries(
      groupNames.map((name) => [name, usageLoad.cores[name] ?? 0]).concat([['machine', usageLoad.cores['machine'] ?? 0]]),
    ),
    cpu_ms_per_delivery: Object.fromEntries(
      groupNames.map((name) => [name, round(((usage.cpu[name] ?? 0) * 1000) / Math.max(1, delivered), 2)]),
    ),
    cpu_window_s: usage.seconds,
    service_threads_cpu_s: threadCpuDelta(threadsBefore, threadsAfter),
    service_probe: serviceProbe,
    setup: {
      database: ownPostgres?.description ?? (databaseUrl ? 'PostgreSQL at DATABASE_URL' : 'PGlite in its own process, spawned by the service (embedded)'),
      temporal: ownTemporal?.description ?? (temporalAddress ? `Temporal at TEMPORAL_ADDRESS` : 'Temporal dev server spawned by the service (embedded)'),
      state_dir: path.dirname(workDir),
      data_dir_initialised_before: Boolean(args['warm-data-dir']),
    },
    temporal_server: temporalBefore && temporalAfter ? costPerDelivery(temporalBefore, temporalAfter, delivered) : undefined,
    db_statements: statements
      ? {
          note: 'pg_stat_statements over the load and drain window (warm-up excluded)',
          calls: statements.calls,
          calls_per_delivery: round(statements.calls / Math.max(1, delivered), 2),
          transactions_per_delivery: round(statements.transactions_committed / Math.max(1, delivered), 2),
          exec_ms_per_delivery: round(statements.total_ms / Math.max(1, delivered), 3),
          top: statements.top,
        }
      : undefined,
    startup: {
      ready_s: round(stack.startupMs / 1000, 1),
      cpu_s: Object.fromEntries(groupNames.map((name) => [name, startupUsage.cpu[name] ?? 0])),
    },
    shutdown: { ms: Math.round(stopMs), exit: exitStatus },
    publish_error_examples: publishErrors,
    invalid_signature_examples: counters.invalidExamples,
    receiver_tls_connections: counters.tlsConnections,
    warmup: { events: warmupEvents, deliveries: warmupIds.size, landed: warmupLanded },
    service_env: extraEnv,
    prebuilt_bundle: Boolean(bundlePath),
    profile: profile
      ? {
          dir: path.relative(REPO_ROOT, profileDir!),
          busy_ms: profile.busyMs,
          threads: profile.threads,
          categories: profile.categories,
          packages: profile.packages.slice(0, 25),
          functions: profile.functions.slice(0, 30),
        }
      : undefined,
    timeline: bins,
  };

  const rateName = maxRate ? 'max' : `r${rate}`;
  const files = outputPaths(
    [stamp(), stack.mode, rateName, `w${webhookCount}`, failRatio ? `f${failRatio}` : '', trust === 'ca-file' ? '' : trust, args.label ?? '']
      .filter(Boolean)
      .join('-'),
  );
  const res = resourceSeries(sampler, loadStart, groupNames, drainEnd);
  const machineSeries = resourceSeries(sampler, loadStart, ['machine'], drainEnd).cpu['machine']!;
  const otherSeries: [number, number][] = machineSeries.map(([x, y], i) => [
    x,
    round(Math.max(0, y - groupNames.reduce((sum, name) => sum + (res.cpu[name]![i]?.[1] ?? 0), 0)), 2),
  ]);
  const xMax = Math.ceil((drainEnd - loadStart) / 1000);
  const chart = renderChart({
    title: `Webhook delivery: ${maxRate ? 'max rate' : `${rate} events/s`} for ${duration} s, ${webhookCount} webhook${webhookCount > 1 ? 's' : ''}/event${failRatio ? `, ${failRatio * 100}% answered 500` : ''} (${stack.mode})`,
    subtitle: [
      `${result.throughput_dps} deliveries/s sustained · latency p50 ${result.latency_ms.p50} ms, p99 ${result.latency_ms.p99} ms · lost ${result.lost} · duplicates ${result.duplicates} · invalid signatures ${result.invalid_signatures} · service RSS max ${(rssMb['service'] as { max: number }).max} MB`,
      `${result.date} · ${result.host.cpus} cores · trust: ${trust} · load average before: ${loadBefore.replace(/^.*load average: /, '')} · other processes used ${round(otherCpu / usage.seconds, 2)} cores`,
    ],
    xMax,
    markers: [{ x: (publishEnd - loadStart) / 1000, label: 'publishing ends' }],
    panels: [
      {
        title: 'Throughput per second',
        yLabel: 'per second',
        series: [
          { name: 'delivered/s', color: '#1f77b4', points: bins.map((b) => [b.t + 0.5, b.delivered]) },
          { name: 'published deliveries/s', color: '#aaaaaa', dash: '5 3', points: bins.map((b) => [b.t + 0.5, b.published * webhookCount]) },
        ],
      },
      latencyPanel(bins),
      cpuPanel({ ...res.cpu, other: otherSeries }, eluSeries),
      {
        title: 'Resident memory by process',
        yLabel: 'MB',
        series: groupNames
          .filter((name) => name !== 'bench')
          .map((name) => ({ name, color: GROUP_COLORS[name] ?? '#333', points: res.rss[name]! })),
        refs: [{ y: 400, label: 'service target', color: '#1f77b4' }],
      },
    ],
  });
  writeFileSync(files.json, `${JSON.stringify({ ...result, chart: path.relative(REPO_ROOT, files.svg) }, null, 2)}\n`);
  writeFileSync(files.svg, chart);

  const rssOf = (name: string) => (rssMb[name] as { max: number } | undefined)?.max;
  /** The database's process group, when the bench can see it: the embedded PGlite process or a local Postgres. */
  const databaseGroup = groupNames.find((name) => name === 'pglite' || name === 'postgres');
  printTable(`Benchmark (${stack.mode}): ${maxRate ? `max rate, ${concurrency} in flight` : `${rate} events/s`}, ${duration} s, ${webhookCount} webhook(s), fail ratio ${failRatio}`, [
    ['published (events)', `${result.published} (${result.publish_rate_eps}/s achieved, ${publishErrorCount} errors)`],
    ['deliveries expected', expected],
    ['delivered', delivered],
    ['lost', result.lost],
    ['duplicates', result.duplicates],
    ['invalid_signatures', result.invalid_signatures],
    ['injected 500s', result.injected_failures],
    ['throughput_dps (sustained: middle 80% of landings)', result.throughput_dps],
    ['throughput while publishing / peak 10 s', `${result.throughput_while_publishing_dps} / ${result.throughput_peak_10s_dps}`],
    ['throughput overall (to last landing)', result.throughput_overall_dps],
    ['drain after publishing (s)', result.drain_s],
    ['latency_ms', fmtP(result.latency_ms)],
    ['publish_ms', fmtP(result.publish_ms)],
    ['rss_mb max (service/temporal/receiver)', `${rssOf('service')} / ${rssOf('temporal')} / ${rssOf('receiver')}${databaseGroup && rssOf(databaseGroup) !== undefined ? ` / ${databaseGroup} ${rssOf(databaseGroup)}` : ''}`],
    ['cpu_s (service/temporal/receiver/bench)', `${result.cpu_s['service']} / ${result.cpu_s['temporal']} / ${result.cpu_s['receiver']} / ${result.cpu_s['bench']}${databaseGroup && result.cpu_s[databaseGroup] !== undefined ? ` / ${databaseGroup} ${result.cpu_s[databaseGroup]}` : ''}  (other processes ${otherCpu}) over ${usage.seconds} s`],
    ['cpu ms per delivery (service/temporal)', `${result.cpu_ms_per_delivery['service']} / ${result.cpu_ms_per_delivery['temporal']}${databaseGroup ? ` / ${databaseGroup} ${result.cpu_ms_per_delivery[databaseGroup]}` : ''}`],
    [
      'service event loop (publishing)',
      serviceProbe.while_publishing
        ? `utilization mean ${serviceProbe.while_publishing.event_loop_utilization_mean}, delay p99 max ${serviceProbe.while_publishing.event_loop_delay_p99_ms_max} ms`
        : '-',
    ],
    [
      'service memory max (heap used/external)',
      serviceProbe.load_and_drain ? `${serviceProbe.load_and_drain.max_heap_used_mb} / ${serviceProbe.load_and_drain.max_external_mb} MB` : '-',
    ],
    ['service start-up (s)', result.startup.ready_s],
    ['setup', `${result.setup.database}; ${result.setup.temporal}; state in ${result.setup.state_dir}`],
    ...(result.temporal_server
      ? [[
          'temporal server per delivery',
          `${result.temporal_server.persistence_ops_per_delivery} persistence ops (${result.temporal_server.persistence_ms_per_delivery} ms), ${result.temporal_server.frontend_requests_per_delivery} frontend requests`,
        ] as [string, string]]
      : []),
    ...(result.db_statements
      ? [[
          'db statements per delivery',
          `${result.db_statements.calls_per_delivery} statements, ${result.db_statements.transactions_per_delivery} transactions, ${result.db_statements.exec_ms_per_delivery} ms executing`,
        ] as [string, string]]
      : []),
    ['load before', loadBefore],
    ['load after', result.host.load_after],
    ['json', files.json],
    ['chart', files.svg],
    ...(profileDir ? [['profile', path.join(profileDir, 'summary-load.txt')] as [string, string]] : []),
  ]);
  if (publishErrors.length) console.log(`publish errors, e.g.: ${publishErrors.join(' | ')}`);
  if (counters.invalidExamples.length) console.log(`invalid signatures, e.g.: ${counters.invalidExamples.join(' | ')}`);
  if (profile) console.log(`\n${formatSummary({ ...profile, packages: profile.packages.slice(0, 15), functions: profile.functions.slice(0, 20) })}`);
  agent.destroy();
  return result;
}

/** What decides the exit status: 0 when every delivery landed with a valid signature, else 3. */
interface Outcome {
  lost: number;
  invalid_signatures: number;
}

try {
  const outcome = args.ceiling ? await runCeiling() : await runSystem();
  await cleanup();
  const failed = outcome.lost > 0 || outcome.invalid_signatures > 0;
  if (failed) console.error(`\n${outcome.lost} deliveries lost (or still queued at the deadline), ${outcome.invalid_signatures} invalid signatures`);
  process.exit(failed ? 3 : 0);
} catch (error) {
  if (!interrupted) console.error(error instanceof Error ? error.stack ?? error.message : error);
  await cleanup();
  process.exit(1);
}
