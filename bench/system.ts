/**
 * The full-system run of `npm run bench`: the service (one process, or the production topology
 * with --cluster) and an HTTPS receiver in another process; webhooks created through the API;
 * events published through the producers' door at the offered rate for the duration; every
 * delivery awaited (or the deadline); throughput, latency, memory and CPU per process reported
 * as a table, a JSON file and an SVG chart.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openDatabase } from '../src/db/client.ts';
import type { Outcome } from './ceiling.ts';
import { renderChart } from './lib/chart.ts';
import { DeliveryLedger } from './lib/ledger.ts';
import { isInterrupted, killOnExit, onCleanup, workDir } from './lib/lifecycle.ts';
import { options } from './lib/options.ts';
import {
  cpuBetween,
  cpuPanel,
  endProgress,
  fmtP,
  GROUP_COLORS,
  hostInfo,
  latencyPanel,
  loadAverage,
  now,
  outputPaths,
  printTable,
  progress,
  resourceSeries,
  sleep,
  stamp,
} from './lib/output.ts';
import { fireAtRate } from './lib/pacing.ts';
import { readServiceProbe } from './lib/probe-report.ts';
import { startAlongside } from './lib/alongside.ts';
import { ProcessSampler, threadCpu, threadCpuDelta, type ProcessGroup } from './lib/procstat.ts';
import { createProject } from './lib/projects.ts';
import { createPublisher } from './lib/publisher.ts';
import { startBenchCollector } from './lib/tracing.ts';
import { startCertifiedReceiver } from './lib/receiver-client.ts';
import { REPO_ROOT } from './lib/stack.ts';
import { peakThroughput, percentiles, perSecond, round, sustainedThroughput } from './lib/stats.ts';
import { clusterTarget, serviceTarget, type SystemTarget } from './lib/targets.ts';
import { costPerDelivery, scrape, type MetricSnapshot } from './lib/temporal-metrics.ts';
import { formatSummary, summarise, type ProfileSummary } from './profile-summary.ts';

/** Summaries of the service's CPU profile for the load window, one per process and thread. */
/**
 * CPU per delivery of the service and of each database process as a share of the Temporal
 * server's, from one run's CPU seconds (so the machine's speed cancels out): the
 * efficiency targets (service at most 0.35, PGlite at most 0.25). Undefined without a
 * measured Temporal server (an external TEMPORAL_ADDRESS).
 */
function cpuVersusTemporal(cpuSeconds: Record<string, number>, serviceSeconds: number): Record<string, number> | undefined {
  const temporal = cpuSeconds['temporal'];
  if (!temporal) return undefined;
  const ratio = (seconds: number) => round(seconds / temporal, 3);
  const databases = ['pglite', 'postgres'].filter((name) => cpuSeconds[name] !== undefined);
  return { service: ratio(serviceSeconds), ...Object.fromEntries(databases.map((name) => [name, ratio(cpuSeconds[name]!)])) };
}

function summariseProfiles(profileDir: string, target: SystemTarget, window: { fromUs: number; toUs: number }): ProfileSummary | undefined {
  const files = readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length === 0) return undefined;
  const profile = summarise([profileDir], { top: 40, ...window });
  const startup = summarise([profileDir], { top: 15, toUs: window.fromUs });
  writeFileSync(path.join(profileDir, 'summary-load.txt'), `${formatSummary(profile)}\n`);
  // One summary per process and thread as well (Node names them CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile).
  const byRole = new Map<string, string[]>();
  for (const file of files) {
    const [, , , pid, thread] = file.split('.');
    const role =
      Number(pid) === target.serviceProcess?.pid
        ? thread === '0' ? 'service-main-thread' : `service-thread-${thread}`
        : Number(pid) === target.databasePid ? 'pglite' : `process-${pid}-thread-${thread}`;
    byRole.set(role, [...(byRole.get(role) ?? []), path.join(profileDir, file)]);
  }
  for (const [role, roleFiles] of byRole) {
    const summary = summarise(roleFiles, { top: 25, ...window });
    writeFileSync(path.join(profileDir, `summary-load-${role}.txt`), `${formatSummary(summary)}\n`);
  }
  writeFileSync(path.join(profileDir, 'summary-startup.txt'), `${formatSummary(startup)}\n`);
  writeFileSync(path.join(profileDir, 'window.json'), JSON.stringify(window));
  return profile;
}

/** A run of the system benchmark once its parts are up: what every phase shares. */
interface SystemRun {
  runId: string;
  loadBefore: string;
  ledger: DeliveryLedger<'warmup' | 'load'>;
  landings: ReturnType<DeliveryLedger<'warmup' | 'load'>['landings']>;
  receiver: Awaited<ReturnType<typeof startCertifiedReceiver>>['receiver'];
  profileDir: string | undefined;
  tracing: Awaited<ReturnType<typeof startBenchCollector>> | undefined;
  groups: ProcessGroup[];
  sampler: ProcessSampler;
  spawnedAt: number;
  target: SystemTarget;
  servicePid: number | undefined;
}

/** The receiver, then the service (embedded or the production topology), sampled from its start. */
async function startSystem(): Promise<SystemRun> {
  const { failRatio } = options;
  const loadBefore = loadAverage();
  const runId = randomBytes(4).toString('hex');
  // Deliveries: publish start per delivery id, and landings (first 200 per id).
  const ledger = new DeliveryLedger<'warmup' | 'load'>();
  const landings = ledger.landings('load');

  const { receiver, certFile } = await startCertifiedReceiver(workDir, { failRatio, failCap: options.failCap }, (batch) => {
    for (let i = 0; i < batch.ids.length; i += 1) {
      if (batch.status[i] === 200 && batch.dup[i] === 0) ledger.landed(batch.ids[i]!, batch.t[i]!);
    }
  });
  killOnExit(receiver.pid);
  onCleanup(() => receiver.stop());

  const profileDir = options.cpuProf ? path.join(REPO_ROOT, 'bench', 'results', 'profiles', `${stamp()}-${runId}`) : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--cpu-prof-interval=1000'] : [];
  const tracing = options.tracing ? await startBenchCollector() : undefined;
  const planInputs = { caFile: certFile, nodeArgs, env: tracing?.env ?? {} };
  const plan = options.cluster ? clusterTarget(planInputs, options.cluster) : serviceTarget(planInputs);
  const groups = [
    ...plan.groups,
    ...(tracing ? [tracing.group] : []),
    { name: 'receiver', pids: () => [receiver.pid] },
    { name: 'bench', pids: () => [process.pid] },
  ];
  const sampler = new ProcessSampler(groups, 500);
  sampler.start();
  const spawnedAt = now();
  const target = await plan.start();
  const servicePid = target.serviceProcess?.pid;

  return { runId, loadBefore, ledger, landings, receiver, profileDir, tracing, groups, sampler, spawnedAt, target, servicePid };
}

/** The project, its webhooks (on the receiver) and its producer key; the publisher that uses them. */
async function setUpProject({ runId, receiver, target }: SystemRun) {
  const { webhookCount, concurrency } = options;
  const projectId = `bench-${runId}`;
  const database = await openDatabase({ kind: 'postgres', url: target.databaseUrl, poolMax: 1 });
  const urls = Array.from({ length: webhookCount }, (_, i) => `${receiver.url}/hooks/${i}`);
  const project = await createProject(database.db, target.apiUrls, projectId, urls).finally(() => database.close());
  receiver.setSecrets(project.webhooks.map((webhook) => webhook.secret));

  const publisher = createPublisher(target.apiUrls, project.producerKey, projectId, Math.max(concurrency, 64));
  onCleanup(async () => publisher.close());

  return publisher;
}

/** Warm-up: a few events, delivered before measuring (connections, JIT, workflow cache). */
async function warmUp({ runId, ledger, sampler }: SystemRun, publisher: ReturnType<typeof createPublisher>): Promise<void> {
  const { warmupEvents } = options;
  sampler.phase = 'warmup';
  if (warmupEvents > 0) {
    process.stderr.write(`warm-up: ${warmupEvents} events...\n`);
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(4, warmupEvents) }, async () => {
        while (next < warmupEvents) {
          const started = now();
          const result = await publisher.publish(next++, `warm-${runId}`);
          for (const id of result.deliveryIds) ledger.sent(id, 'warmup', started);
        }
      }),
    );
    const warmDeadline = Date.now() + 60_000;
    while (ledger.landings('warmup').length < ledger.expected('warmup') && Date.now() < warmDeadline && !isInterrupted()) await sleep(100);
  }

}

/** The measured run: publishing at the offered rate for the duration; what it published and when. */
async function publishLoad({ runId, ledger, landings, receiver, sampler, target, servicePid }: SystemRun, publisher: ReturnType<typeof createPublisher>) {
  const { maxRate, rate, duration, webhookCount, concurrency, maxInFlight } = options;
  const publishTimes: number[] = [];
  const publishDurations: number[] = [];
  const publishErrors: string[] = [];
  let publishErrorCount = 0;
  let inFlight = 0;
  let deferred = 0;
  await target.statements?.reset();
  const temporalBefore: MetricSnapshot | undefined = target.temporalMetricsUrl ? await scrape(target.temporalMetricsUrl) : undefined;
  const threadsBefore = servicePid ? threadCpu(servicePid) : {};
  sampler.phase = 'load';
  const loadStart = now();
  const loadStartHrUs = Number(process.hrtime.bigint() / 1000n);
  const loadEnd = loadStart + duration * 1000;
  const alongside = options.alongside ? startAlongside(options.alongside, loadStart) : undefined;
  const fire = async (seq: number): Promise<void> => {
    inFlight += 1;
    const started = now();
    publishTimes.push(started);
    const result = await publisher.publish(seq, `ev-${runId}`);
    publishDurations.push(now() - started);
    inFlight -= 1;
    if (result.error) {
      publishErrorCount += 1;
      if (publishErrors.length < 5) publishErrors.push(result.error);
    }
    for (const id of result.deliveryIds) ledger.sent(id, 'load', started);
  };

  let lastDelivered = 0;
  let lastPublished = 0;
  const ticker = setInterval(() => {
    const elapsed = (now() - loadStart) / 1000;
    const delivered = landings.length;
    const phase = elapsed <= duration ? `${elapsed.toFixed(0)}s/${duration}s` : `draining ${(elapsed - duration).toFixed(0)}s`;
    progress(
      `${phase}  sent ${publishTimes.length} (${publishTimes.length - lastPublished}/s)  delivered ${delivered} (${delivered - lastDelivered}/s)  in flight ${ledger.expected('load') - delivered + inFlight * webhookCount}${publishErrorCount ? `  publish errors ${publishErrorCount}` : ''}${receiver.counters?.injectedFailures ? `  500s ${receiver.counters.injectedFailures}` : ''}`,
    );
    lastDelivered = delivered;
    lastPublished = publishTimes.length;
  }, 1000);

  if (maxRate) {
    let seq = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (now() < loadEnd && !isInterrupted()) await fire(seq++);
      }),
    );
  } else {
    deferred = await fireAtRate(rate, Math.round(rate * duration), maxInFlight, fire);
  }
  const publishEnd = now();
  sampler.phase = 'drain';
  return { publishTimes, publishDurations, publishErrors, publishErrorCount, deferred, temporalBefore, threadsBefore, loadStart, loadStartHrUs, alongside, publishEnd, ticker };
}

type PublishedLoad = Awaited<ReturnType<typeof publishLoad>>;

/** Every delivery landed (or the deadline passed); the figures of the window read; the service stopped. */
async function drainAndStop(run: SystemRun, load: PublishedLoad) {
  const { landings, ledger, receiver, sampler, target, servicePid, profileDir, spawnedAt } = run;
  const { publishTimes, temporalBefore, loadStart, loadStartHrUs, publishEnd, ticker } = load;
  const { deadlineS } = options;
  const expected = ledger.expected('load');
  const drainDeadline = publishEnd + deadlineS * 1000;
  while (landings.length < expected && now() < drainDeadline && !isInterrupted()) await sleep(100);
  await receiver.flush();
  const drainEnd = now();
  const loadEndHrUs = Number(process.hrtime.bigint() / 1000n);
  clearInterval(ticker);
  progress(
    `done: sent ${publishTimes.length}  delivered ${landings.length}/${expected}  in ${((drainEnd - loadStart) / 1000).toFixed(1)} s`,
    true,
  );
  endProgress();
  const threadsAfter = servicePid ? threadCpu(servicePid) : {};
  sampler.sample();
  const temporalAfter = target.temporalMetricsUrl && temporalBefore ? await scrape(target.temporalMetricsUrl) : undefined;
  const statements = await target.statements?.read().catch(() => undefined);
  const usage = cpuBetween(sampler, loadStart, drainEnd);
  const usageLoad = cpuBetween(sampler, loadStart, publishEnd);
  const startupUsage = cpuBetween(sampler, spawnedAt, loadStart);
  const unexpected = ledger.unexpected;

  // The service stops (profiles are written when it exits).
  sampler.phase = 'shutdown';
  const serviceRssEnd = sampler.samples.at(-1)?.groups['service']?.rssMb ?? 0;
  const stopStarted = now();
  const exitStatus = await target.stop();
  const stopMs = now() - stopStarted;
  sampler.stop();
  const counters = receiver.counters!;

  let profile: ProfileSummary | undefined;
  if (profileDir) {
    profile = summariseProfiles(profileDir, target, { fromUs: loadStartHrUs, toUs: loadEndHrUs });
    if (!profile) console.error(`no .cpuprofile written in ${profileDir} (service exit: ${JSON.stringify(exitStatus)})`);
  }
  const probe = target.serviceProcess
    ? readServiceProbe(target.serviceProcess.probeFile, target.serviceProcess.pid, { spawnedAt, loadStart, publishEnd, drainEnd })
    : undefined;

  return { expected, drainEnd, threadsAfter, temporalAfter, statements, usage, usageLoad, startupUsage, unexpected, serviceRssEnd, exitStatus, stopMs, counters, profile, probe };
}

type DrainedRun = Awaited<ReturnType<typeof drainAndStop>>;

/** The run's result, as its JSON has it. */
async function systemResult(run: SystemRun, load: PublishedLoad, drained: DrainedRun) {
  const { maxRate, rate, duration, webhookCount, failRatio, concurrency, warmupEvents, trust } = options;
  const { loadBefore, ledger, landings, groups, sampler, target, servicePid, tracing, profileDir } = run;
  const { publishTimes, publishDurations, publishErrors, publishErrorCount, deferred, threadsBefore, temporalBefore, loadStart, alongside, publishEnd } = load;
  const { expected, drainEnd, threadsAfter, temporalAfter, statements, usage, usageLoad, startupUsage, unexpected, serviceRssEnd, exitStatus, stopMs, counters, profile, probe } = drained;
  const bins = perSecond(loadStart, drainEnd, publishTimes, landings);
  const publishSeconds = Math.max(0.001, (publishEnd - loadStart) / 1000);
  // While publishing: the mean of the per-second counts, after the first 10% (ramp-up).
  const skip = Math.min(5, Math.floor(duration / 10));
  const publishingBins = bins.slice(skip, Math.max(skip + 1, Math.floor(publishSeconds)));
  const throughputWhilePublishing = publishingBins.reduce((sum, bin) => sum + bin.delivered, 0) / Math.max(1, publishingBins.length);
  const lastLanding = landings.reduce((max, l) => Math.max(max, l.t), loadStart);
  const groupNames = groups.map((g) => g.name);
  const rssMb: Record<string, Record<string, number>> = {};
  for (const name of groupNames) {
    rssMb[name] = {
      max: round(sampler.maxRss(name), 1),
      max_during_load: round(sampler.maxRss(name, ['load', 'drain']), 1),
      max_during_startup: round(sampler.maxRss(name, ['startup', 'warmup']), 1),
      // The group's real memory: shared pages counted once (its processes' PSS summed).
      pss_max_during_load: round(sampler.maxRss(name, ['load', 'drain'], 'pssMb'), 1),
      largest_process_max: round(sampler.maxRss(name, undefined, 'largestRssMb'), 1),
    };
  }
  if (rssMb['service']) rssMb['service']['at_end_of_load'] = round(serviceRssEnd, 1);
  const oursCpu = groupNames.reduce((sum, name) => sum + (usage.cpu[name] ?? 0), 0);
  const otherCpu = round((usage.cpu['machine'] ?? 0) - oursCpu, 2);
  const delivered = landings.length;
  // The service's CPU: its one process, or the API and worker replicas together.
  const serviceCpu = usage.cpu['service'] ?? round((usage.cpu['api'] ?? 0) + (usage.cpu['worker'] ?? 0), 2);
  const perDelivery = (seconds: number) => round((seconds * 1000) / Math.max(1, delivered), 2);
  const result = {
    mode: target.mode,
    label: options.label,
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    host: { ...hostInfo(), load_before: loadBefore, load_after: loadAverage() },
    offered_rate: maxRate ? 'max' : rate,
    duration_s: duration,
    webhooks: webhookCount,
    fail_ratio: failRatio,
    fail_cap: options.failCap,
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
    deadline_reached: expected - delivered > 0 && !isInterrupted(),
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
    ...(alongside && { alongside: { ...(await alongside.done), latency_ms: alongside.split(landings) } }),
    publish_ms: percentiles(publishDurations),
    rss_mb: rssMb,
    cpu_s: { ...Object.fromEntries(groupNames.map((name) => [name, usage.cpu[name] ?? 0])), service: serviceCpu, other_processes: otherCpu } as Record<string, number>,
    cpu_cores_while_publishing: Object.fromEntries(
      groupNames.map((name) => [name, usageLoad.cores[name] ?? 0]).concat([['machine', usageLoad.cores['machine'] ?? 0]]),
    ),
    cpu_ms_per_delivery: {
      ...Object.fromEntries(groupNames.map((name) => [name, perDelivery(usage.cpu[name] ?? 0)])),
      service: perDelivery(serviceCpu),
    } as Record<string, number>,
    cpu_vs_temporal: cpuVersusTemporal(usage.cpu, serviceCpu),
    cpu_window_s: usage.seconds,
    service_threads_cpu_s: servicePid ? threadCpuDelta(threadsBefore, threadsAfter) : undefined,
    service_probe: probe?.probe,
    setup: { ...target.setup, state_dir: path.dirname(workDir) },
    /** Tracing on (--tracing): where the spans went and how many (the collector's CPU is in cpu_s). */
    tracing: await tracing?.summary(),
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
      ready_s: round(target.startupMs / 1000, 1),
      cpu_s: Object.fromEntries(groupNames.map((name) => [name, startupUsage.cpu[name] ?? 0])),
    },
    shutdown: { ms: Math.round(stopMs), exit: exitStatus },
    publish_error_examples: publishErrors,
    invalid_signature_examples: counters.invalidExamples,
    receiver_tls_connections: counters.tlsConnections,
    warmup: { events: warmupEvents, deliveries: ledger.expected('warmup'), landed: ledger.landings('warmup').length },
    service_env: options.extraEnv,
    prebuilt_bundle: options.prebuiltBundle,
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

  return { result, bins, groupNames, rssMb, otherCpu, serviceCpu, usage };
}

type SystemResult = Awaited<ReturnType<typeof systemResult>>;

/** The JSON and the chart of the run; their paths. */
function writeSystemFiles(run: SystemRun, load: PublishedLoad, drained: DrainedRun, { result, bins, groupNames, rssMb, otherCpu, usage }: SystemResult) {
  const { maxRate, rate, duration, webhookCount, failRatio, trust } = options;
  const { loadBefore, sampler, target } = run;
  const { loadStart, publishEnd } = load;
  const { drainEnd, probe } = drained;
  const rateName = maxRate ? 'max' : `r${rate}`;
  const files = outputPaths(
    options.out,
    [stamp(), target.mode, rateName, `w${webhookCount}`, failRatio ? `f${failRatio}` : '', trust === 'ca-file' ? '' : trust, options.label ?? '']
      .filter(Boolean)
      .join('-'),
  );
  const res = resourceSeries(sampler, loadStart, groupNames, drainEnd);
  const machineSeries = resourceSeries(sampler, loadStart, ['machine'], drainEnd).cpu['machine']!;
  const otherSeries: [number, number][] = machineSeries.map(([x, y], i) => [
    x,
    round(Math.max(0, y - groupNames.reduce((sum, name) => sum + (res.cpu[name]![i]?.[1] ?? 0), 0)), 2),
  ]);
  const serviceRssMax = rssMb['service']?.['max'] ?? round((rssMb['api']?.['max'] ?? 0) + (rssMb['worker']?.['max'] ?? 0), 1);
  const chart = renderChart({
    title: `Webhook delivery: ${maxRate ? 'max rate' : `${rate} events/s`} for ${duration} s, ${webhookCount} webhook${webhookCount > 1 ? 's' : ''}/event${failRatio ? `, ${failRatio * 100}% answered 500` : ''} (${target.mode})`,
    subtitle: [
      `${result.throughput_dps} deliveries/s sustained · latency p50 ${result.latency_ms.p50} ms, p99 ${result.latency_ms.p99} ms · lost ${result.lost} · duplicates ${result.duplicates} · invalid signatures ${result.invalid_signatures} · service RSS max ${serviceRssMax} MB`,
      `${result.date} · ${result.host.cpus} cores · trust: ${trust} · load average before: ${loadBefore.replace(/^.*load average: /, '')} · other processes used ${round(otherCpu / usage.seconds, 2)} cores`,
    ],
    xMax: Math.ceil((drainEnd - loadStart) / 1000),
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
      cpuPanel({ ...res.cpu, other: otherSeries }, probe?.eventLoopUtilization),
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

  return { files, serviceRssMax };
}

/** The run's table on the terminal. */
function printSystemReport(run: SystemRun, drained: DrainedRun, { result, groupNames, rssMb, otherCpu, serviceCpu, usage }: SystemResult, written: ReturnType<typeof writeSystemFiles>) {
  const { maxRate, rate, duration, webhookCount, failRatio, concurrency } = options;
  const { loadBefore, target, profileDir } = run;
  const { expected, counters, profile, probe } = drained;
  const { files, serviceRssMax } = written;
  const { delivered } = result;
  const publishErrorCount = result.publish_errors;
  const publishErrors = result.publish_error_examples;
  const backends = groupNames.filter((name) => !['service', 'api', 'worker', 'helpers', 'receiver', 'bench'].includes(name));
  const byGroup = (values: Record<string, number>) => backends.map((name) => `${name} ${values[name]}`).join(' / ');
  const serviceProbe = probe?.probe;
  printTable(`Benchmark (${target.mode}): ${maxRate ? `max rate, ${concurrency} in flight` : `${rate} events/s`}, ${duration} s, ${webhookCount} webhook(s), fail ratio ${failRatio}`, [
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
    ['rss_mb max (service; backends)', `${serviceRssMax}; ${backends.map((name) => `${name} ${rssMb[name]?.['max']}`).join(' / ')}; receiver ${rssMb['receiver']?.['max']}`],
    [
      'memory (PSS) max during load',
      groupNames.filter((name) => name !== 'bench').map((name) => `${name} ${rssMb[name]?.['pss_max_during_load']}`).join(' / '),
    ],
    ['cpu_s (service; backends)', `${serviceCpu}; ${byGroup(result.cpu_s)}; receiver ${result.cpu_s['receiver']}, bench ${result.cpu_s['bench']} (other processes ${otherCpu}) over ${usage.seconds} s`],
    ['cpu ms per delivery (service; backends)', `${result.cpu_ms_per_delivery.service}; ${byGroup(result.cpu_ms_per_delivery)}`],
    ['cpu per delivery vs the Temporal server', Object.entries(result.cpu_vs_temporal ?? {}).map(([name, ratio]) => `${name} ${ratio}`).join(' / ') || '-'],
    ...(result.cpu_ms_per_delivery['api'] !== undefined
      ? [['cpu ms per delivery (api / worker replicas)', `${result.cpu_ms_per_delivery['api']} / ${result.cpu_ms_per_delivery['worker']}`] as [string, string]]
      : []),
    [
      'service event loop (publishing)',
      serviceProbe?.while_publishing
        ? `utilization mean ${serviceProbe.while_publishing.event_loop_utilization_mean}, delay p99 max ${serviceProbe.while_publishing.event_loop_delay_p99_ms_max} ms`
        : '-',
    ],
    [
      'service memory max (heap used/external)',
      serviceProbe?.load_and_drain ? `${serviceProbe.load_and_drain.max_heap_used_mb} / ${serviceProbe.load_and_drain.max_external_mb} MB` : '-',
    ],
    ['service start-up (s)', result.startup.ready_s],
    ...(result.tracing ? [['tracing', `on: ${result.tracing.spans_exported} spans exported; the collector's CPU is the group "collector"`] as [string, string]] : []),
    ['setup', `${Object.values(target.setup).filter((v) => typeof v === 'string').join('; ')}; state in ${result.setup.state_dir}`],
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
}

export async function runSystem(): Promise<Outcome> {
  const run = await startSystem();
  const publisher = await setUpProject(run);
  await warmUp(run, publisher);
  const load = await publishLoad(run, publisher);
  const drained = await drainAndStop(run, load);
  const summary = await systemResult(run, load, drained);
  printSystemReport(run, drained, summary, writeSystemFiles(run, load, drained, summary));
  return summary.result;
}
