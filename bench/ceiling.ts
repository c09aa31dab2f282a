/**
 * `npm run bench -- --ceiling`: the send path alone. The activity's own sending code
 * (createSender + buildNotificationHeaders/Body, in bench/ceiling-sender.ts, its own process)
 * against the bench's receiver, with no Temporal and no database.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CeilingOptions, FromCeiling } from './ceiling-sender.ts';
import { renderChart } from './lib/chart.ts';
import { killOnExit, onCleanup, workDir } from './lib/lifecycle.ts';
import { options } from './lib/options.ts';
import {
  cpuBetween,
  cpuPanel,
  endProgress,
  fmtP,
  hostInfo,
  latencyPanel,
  loadAverage,
  now,
  outputPaths,
  printTable,
  progress,
  resourceSeries,
  stamp,
} from './lib/output.ts';
import { ProcessSampler } from './lib/procstat.ts';
import { startCertifiedReceiver } from './lib/receiver-client.ts';
import { killGroup, REPO_ROOT } from './lib/stack.ts';
import { percentiles, perSecond, round } from './lib/stats.ts';
import { formatSummary, summarise } from './profile-summary.ts';

/** What decides the exit status: 0 when every delivery landed with a valid signature, else 3. */
export interface Outcome {
  lost: number;
  invalid_signatures: number;
}

/** Sends as fast as the sending code can, for `--duration` seconds; returns the run's figures. */
/** What the sender started and the receiver saw land, matched by delivery id whichever comes first. */
class CeilingLedger {
  readonly starts = new Map<string, number>();
  readonly pending = new Map<string, number>();
  readonly landings: { t: number; latency: number }[] = [];
  readonly sendMs: number[] = [];
  readonly startTimes: number[] = [];
  sendFailures = 0;

  land(id: string, t: number): void {
    const start = this.starts.get(id);
    if (start === undefined) this.pending.set(id, t);
    else this.landings.push({ t, latency: t - start });
  }

  started(message: Extract<FromCeiling, { type: 'starts' }>): void {
    for (let i = 0; i < message.ids.length; i += 1) {
      this.starts.set(message.ids[i]!, message.t[i]!);
      this.startTimes.push(message.t[i]!);
      this.sendMs.push(message.sendMs[i]!);
      const landed = this.pending.get(message.ids[i]!);
      if (landed !== undefined) {
        this.pending.delete(message.ids[i]!);
        this.landings.push({ t: landed, latency: landed - message.t[i]! });
      }
    }
    this.sendFailures += message.failed;
  }
}

/** Forks the sender (bench/ceiling-sender.ts) in a process group of its own, killed with the bench. */
function forkCeilingSender(senderOptions: CeilingOptions, certFile: string, profileDir: string | undefined): ChildProcess {
  const child = fork(fileURLToPath(new URL('./ceiling-sender.ts', import.meta.url)), [JSON.stringify(senderOptions)], {
    execArgv: [...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), '--import', 'tsx'],
    env: options.trust === 'node-extra-ca' ? { ...process.env, NODE_EXTRA_CA_CERTS: certFile } : process.env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  killOnExit(child.pid!);
  onCleanup(async () => killGroup(child.pid, 'SIGKILL'));
  return child;
}

/** Follows the sender from its warm-up to its end; when its load started, and its last word. */
async function followCeilingSender(child: ChildProcess, ledger: CeilingLedger, sampler: ProcessSampler) {
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
        ledger.started(message);
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
    const count = ledger.landings.length;
    progress(`ceiling ${elapsed.toFixed(0)}s/${options.duration}s  delivered ${count}  rate ${count - lastCount}/s`);
    lastCount = count;
  }, 1000);
  await finished.finally(() => clearInterval(ticker));
  return { loadStart, done };
}

export async function runCeiling(): Promise<Outcome> {
  const { duration, trust, ceilingConcurrency } = options;
  const loadBefore = loadAverage();
  const ledger = new CeilingLedger();
  const { receiver, certFile } = await startCertifiedReceiver(workDir, { failRatio: 0, failCap: options.failCap }, (batch) => {
    for (let i = 0; i < batch.ids.length; i += 1) {
      if (batch.status[i] === 200 && batch.dup[i] === 0) ledger.land(batch.ids[i]!, batch.t[i]!);
    }
  });
  killOnExit(receiver.pid);
  onCleanup(() => receiver.stop());
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  receiver.setSecrets([secret]);

  const senderOptions: CeilingOptions = {
    url: `${receiver.url}/hooks/0`,
    caFile: certFile,
    secret,
    durationS: duration,
    concurrency: ceilingConcurrency,
    timeoutMs: 30_000,
    caOption: trust === 'ca-file',
  };
  const profileDir = options.cpuProf ? path.join(REPO_ROOT, 'bench', 'results', 'profiles', `${stamp()}-ceiling`) : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const child = forkCeilingSender(senderOptions, certFile, profileDir);
  const sampler = new ProcessSampler([
    { name: 'sender', pids: () => [child.pid!] },
    { name: 'receiver', pids: () => [receiver.pid] },
    { name: 'bench', pids: () => [process.pid] },
  ]);
  sampler.phase = 'startup';
  sampler.start();
  const { loadStart, done } = await followCeilingSender(child, ledger, sampler);
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
  return reportCeiling({ ledger, counters: receiver.counters!, sampler, done, loadStart, loadEnd, loadBefore });
}

/** The run's JSON, chart and table. */
function reportCeiling({
  ledger,
  counters,
  sampler,
  done,
  loadStart,
  loadEnd,
  loadBefore,
}: {
  ledger: CeilingLedger;
  counters: NonNullable<Awaited<ReturnType<typeof startCertifiedReceiver>>['receiver']['counters']>;
  sampler: ProcessSampler;
  done: Extract<FromCeiling, { type: 'done' }> | undefined;
  loadStart: number;
  loadEnd: number;
  loadBefore: string;
}): Outcome {
  const { duration, trust, ceilingConcurrency } = options;
  const { landings, sendMs, startTimes, sendFailures } = ledger;
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
  const files = outputPaths(options.out, [stamp(), 'ceiling', trust === 'ca-file' ? '' : trust, options.label ?? ''].filter(Boolean).join('-'));
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
