/**
 * The noisy-neighbour run of `npm run bench -- --noisy-neighbour`: does one customer's trouble
 * slow down another customer's deliveries? Two customers on one deployment (embedded, or the
 * production topology with --cluster): the healthy project A, whose webhook is on a receiver on
 * 127.0.0.2, and the neighbour B of `--neighbour-scenario` (bench/lib/neighbours.ts), whose
 * endpoint is on 127.0.0.1, another destination host. A publishes at a steady rate alone; then B's
 * load comes (a burst to a hanging endpoint, a backlog of dead letters...); then A publishes again
 * beside it (while B floods the producers' door or retries in bulk, for those scenarios). The run
 * compares A's latency (publish call started → receiver got the POST) in the two phases and
 * follows B's deliveries by status, their attempts and the requests open at B's endpoint.
 *
 * Each phase waits for A's deliveries at most --deadline seconds after its publishing. A delivery
 * that has not landed by then is *late* if the service still holds it (any status but
 * `delivered` or `dead_letter`: it would land later) and *lost* otherwise; a late delivery
 * counts in the percentiles at the time it had waited, so they are lower bounds then. B's
 * deliveries that must land (publish-flood's accepted events) are accounted for the same way.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { inArray } from 'drizzle-orm';
import { openDatabase, type Database } from '../src/db/client.ts';
import { deliveries } from '../src/db/schema.ts';
import { statusCounts } from '../test/faults/workload.ts';
import type { Outcome } from './ceiling.ts';
import type { ReceiverBehaviour } from './receiver.ts';
import { DeliveryLedger, type Landing } from './lib/ledger.ts';
import { isInterrupted, killOnExit, onCleanup, workDir } from './lib/lifecycle.ts';
import { NEIGHBOURS, type Neighbour, type NeighbourSummary } from './lib/neighbours.ts';
import {
  formatProgress,
  formatStatuses,
  printNeighbourReport,
  renderNeighbourChart,
  type DeliveryFigures,
  type NeighbourSample,
  type PhaseResult,
} from './lib/neighbour-report.ts';
import { options, type NeighbourScenario } from './lib/options.ts';
import { endProgress, hostInfo, loadAverage, now, outputPaths, progress, sleep, stamp } from './lib/output.ts';
import { fireAtRate } from './lib/pacing.ts';
import { machineCpu } from './lib/procstat.ts';
import { createProject } from './lib/projects.ts';
import { createPublisher, type EventPublisher } from './lib/publisher.ts';
import { startCertifiedReceiver, type ReceiverHandle } from './lib/receiver-client.ts';
import { REPO_ROOT } from './lib/stack.ts';
import { percentiles, perSecond, round, type SecondBin } from './lib/stats.ts';
import { clusterTarget, serviceTarget } from './lib/targets.ts';

/** How often B's deliveries are counted. */
const SAMPLE_MS = 5_000;
/** How long the warm-up waits for its deliveries. */
const WARMUP_DEADLINE_S = 60;
/** A's and B's endpoints are on two loopback addresses: to the service, two destination hosts. */
const HEALTHY_HOST = '127.0.0.2';
const NEIGHBOUR_HOST = '127.0.0.1';

type Phase = 'warmup' | 'alone' | 'beside';

/** A receiver of the run, and the most requests open at it at once since the last `takePeak`. */
interface WatchedEndpoint {
  receiver: ReceiverHandle;
  certFile: string;
  takePeak(): number;
}

/** Starts a receiver on `host`; `onLanded` gets each delivery's first verified 200 (its batches come every 100 ms). */
async function startWatchedEndpoint(host: string, behaviour: ReceiverBehaviour, onLanded: (id: string, t: number) => void): Promise<WatchedEndpoint> {
  let peak = 0;
  const { receiver, certFile } = await startCertifiedReceiver(workDir, { ...behaviour, host }, (batch) => {
    peak = Math.max(peak, batch.counters.openRequests);
    for (let i = 0; i < batch.ids.length; i += 1) {
      if (batch.status[i] === 200 && batch.dup[i] === 0) onLanded(batch.ids[i]!, batch.t[i]!);
    }
  });
  killOnExit(receiver.pid);
  onCleanup(() => receiver.stop());
  return {
    receiver,
    certFile,
    takePeak() {
      const most = peak;
      peak = receiver.counters?.openRequests ?? 0;
      return most;
    },
  };
}

/**
 * Waits until every delivery of `phase` has landed, or `deadline`; then sorts those that have not
 * into late (the service still holds them) and lost (delivered unseen, dead-lettered, or unknown).
 */
async function awaitLandings<P extends string>(ledger: DeliveryLedger<P>, phase: P, endpoint: ReceiverHandle, db: Database, deadline: number) {
  while (ledger.landings(phase).length < ledger.expected(phase) && now() < deadline && !isInterrupted()) await sleep(100);
  const ids = ledger.waiting(phase).map((w) => w.id);
  const status = new Map<string, string>();
  for (let i = 0; i < ids.length; i += 10_000) {
    const rows = await db.select({ id: deliveries.id, status: deliveries.status }).from(deliveries).where(inArray(deliveries.id, ids.slice(i, i + 10_000)));
    for (const row of rows) status.set(row.id, row.status);
  }
  // Read after the statuses: a delivery the service marked delivered has been reported by now.
  await endpoint.flush();
  const gone = (id: string) => [undefined, 'delivered', 'dead_letter'].includes(status.get(id));
  const still = ledger.waiting(phase);
  const end = now();
  const landed: Landing[] = ledger.landings(phase).slice();
  const late = still.filter((w) => !gone(w.id));
  const lost = still.filter((w) => gone(w.id));
  return {
    landed,
    end,
    figures: {
      deliveries_expected: ledger.expected(phase),
      delivered: landed.length,
      late: late.length,
      lost: lost.length,
      lost_ids: lost.slice(0, 10).map((w) => w.id),
      latency_ms: percentiles([...landed.map((l) => l.latency), ...late.map((w) => end - w.at)]),
      latency_is_lower_bound: late.length > 0,
    } satisfies DeliveryFigures,
  };
}

/** Publish calls that failed: how many, and the first few. */
function publishErrorLog() {
  const log = { count: 0, examples: [] as string[] };
  const note = (error: string | undefined) => {
    if (!error) return;
    log.count += 1;
    if (log.examples.length < 5) log.examples.push(error);
  };
  return { log, note };
}

interface PhaseDeps {
  ledger: DeliveryLedger<Phase>;
  publisher: EventPublisher;
  endpoint: ReceiverHandle;
  db: Database;
  runId: string;
  noteError: (error: string | undefined) => void;
  /** Zero of the run's timeline (the phases' `started_s`, the samples' `t`). */
  timeline: { origin: number };
}

/** Publishes `total` events of A at --rate, waits for their deliveries (at most `waitS`), and sums the phase up. */
async function runPhase(deps: PhaseDeps, phase: Phase, total: number, waitS: number, onPublished: () => void = () => {}) {
  const publishTimes: number[] = [];
  const publishMs: number[] = [];
  const started = now();
  const cpuBefore = machineCpu();
  const stalls = await fireAtRate(options.rate, total, options.maxInFlight, async (seq) => {
    const at = now();
    publishTimes.push(at);
    const result = await deps.publisher.publish(seq, `${phase}-${deps.runId}`);
    publishMs.push(now() - at);
    deps.noteError(result.error);
    for (const id of result.deliveryIds) deps.ledger.sent(id, phase, at);
  });
  const publishEnd = now();
  const cpuAfter = machineCpu();
  onPublished();
  const { landed, end, figures } = await awaitLandings(deps.ledger, phase, deps.endpoint, deps.db, publishEnd + waitS * 1000);
  const { origin } = deps.timeline;
  const result: PhaseResult = {
    events_published: publishTimes.length,
    publish_cap_stalls: stalls,
    ...figures,
    publish_ms: percentiles(publishMs),
    started_s: round((started - origin) / 1000, 1),
    publishing_s: round((publishEnd - started) / 1000, 1),
    waited_s: round((end - publishEnd) / 1000, 1),
    machine_busy_cores: round((cpuAfter.busySeconds - cpuBefore.busySeconds) / Math.max((publishEnd - started) / 1000, 0.001), 2),
  };
  return { landed, publishTimes, publishEnd, result };
}

/** Counts B's deliveries by status (and B's own progress) every SAMPLE_MS from now on, and A's and B's progress every second. */
function startSampling(db: Database, neighbour: Neighbour, endpoint: WatchedEndpoint, ledger: DeliveryLedger<Phase>, stage: () => string, origin: number) {
  const samples: NeighbourSample[] = [];
  const sample = async () => {
    const { total, attempts, ...statuses } = await statusCounts({ db }, neighbour.webhookIds);
    const progressNow = await neighbour.progress?.();
    const counters = endpoint.receiver.counters;
    samples.push({
      t: round((now() - origin) / 1000, 1),
      stage: stage(),
      deliveries: total,
      statuses,
      attempts,
      endpoint_requests: counters?.requests ?? 0,
      open_requests: counters?.openRequests ?? 0,
      open_requests_peak: endpoint.takePeak(),
      ...(progressNow ? { progress: progressNow } : {}),
    });
  };
  let sampling: Promise<void> | undefined;
  const takeSample = () => {
    sampling ??= sample()
      .catch((error: unknown) => console.error(`\ncounting B's deliveries failed: ${String(error)}`))
      .finally(() => (sampling = undefined));
  };
  takeSample();
  const sampler = setInterval(takeSample, SAMPLE_MS);
  const ticker = setInterval(() => {
    const last = samples.at(-1);
    const phase: Phase = stage() === 'alone' ? 'alone' : 'beside';
    const own = last?.progress ? `, ${formatProgress(last)}` : '';
    progress(
      `${stage()} ${((now() - origin) / 1000).toFixed(0)}s  A delivered ${ledger.landings(phase).length}/${ledger.expected(phase)}  |  B ${formatStatuses(last)}, attempts ${last?.attempts ?? 0}, open at its endpoint ${endpoint.receiver.counters?.openRequests ?? 0}${own}`,
    );
  }, 1000);
  return {
    samples,
    async stop() {
      clearInterval(ticker);
      clearInterval(sampler);
      await sampling;
      await sample();
    },
  };
}

/**
 * The service's environment a scenario needs (--env's win over it): bulk-retry builds its dead
 * letters against the retry schedule, as an open breaker's probes a second apart would take
 * 1,500 s to use up 300 deliveries' attempts.
 */
function scenarioServiceEnv(scenario: NeighbourScenario): Record<string, string> {
  return scenario === 'bulk-retry' ? { CIRCUIT_BREAKER_PROBE_INTERVAL: '0s' } : {};
}

/** The run's customers on a started deployment: A's project, publisher and endpoint (127.0.0.2); B as its scenario made it (127.0.0.1). */
async function setUp(runId: string, ledger: DeliveryLedger<Phase>, neighbourLedger: DeliveryLedger<'neighbour'>) {
  const settings = options.neighbour!;
  const healthy = await startWatchedEndpoint(HEALTHY_HOST, { failRatio: 0, failCap: 0 }, (id, t) => ledger.landed(id, t));
  // Both endpoints serve the run's one certificate, so the service trusts them through this file.
  // The publish flood is about a project's publish quota: the service keeps its own then, and A,
  // a project whose load the operator knows, has a quota of its --rate.
  const keepPublishQuota = settings.scenario === 'publish-flood' || settings.scenario === 'endpoint-recovery';
  const planInputs = { caFile: healthy.certFile, nodeArgs: [], env: scenarioServiceEnv(settings.scenario), keepPublishQuota };
  const target = await (options.cluster ? clusterTarget(planInputs, options.cluster) : serviceTarget(planInputs)).start();
  const database = await openDatabase({ kind: 'postgres', url: target.databaseUrl, poolMax: 1 });
  onCleanup(() => database.close());
  const a = await createProject(database.db, target.apiUrls, `bench-${runId}-a`, [`${healthy.receiver.url}/hooks/0`], keepPublishQuota ? { publishRate: options.rate } : {});
  healthy.receiver.setSecrets([a.webhooks[0]!.secret]);
  const publishA = createPublisher(target.apiUrls, a.producerKey, a.projectId, 64);
  onCleanup(async () => publishA.close());
  const errors = publishErrorLog();
  const stage = { name: 'setup' };
  let endpointB: WatchedEndpoint | undefined;
  const neighbour = await NEIGHBOURS[settings.scenario]({
    settings,
    runId,
    apiUrls: target.apiUrls,
    db: database.db,
    startEndpoint: async (behaviour) => {
      endpointB = await startWatchedEndpoint(NEIGHBOUR_HOST, behaviour, (id, t) => neighbourLedger.landed(id, t));
      return endpointB.receiver;
    },
    expectDelivery: (id, at) => neighbourLedger.sent(id, 'neighbour', at),
    noteError: errors.note,
    setStage: (name) => (stage.name = name),
  });
  if (!endpointB) throw new Error(`the ${settings.scenario} scenario started no endpoint`);
  return { healthy, target, db: database.db, publishA, errors, stage, neighbour, endpointB };
}

type Run = Awaited<ReturnType<typeof setUp>>;

/** Runs the scenario, prints its report, writes its JSON and chart; `lost` and `invalid_signatures` decide the exit status. */
export async function runNoisyNeighbour(): Promise<Outcome> {
  const { rate, duration, deadlineS, warmupEvents } = options;
  const loadBefore = loadAverage();
  const runId = randomBytes(4).toString('hex');
  const ledger = new DeliveryLedger<Phase>();
  const neighbourLedger = new DeliveryLedger<'neighbour'>();
  const run = await setUp(runId, ledger, neighbourLedger);
  const { neighbour, stage } = run;

  const timeline = { origin: now() };
  const deps: PhaseDeps = { ledger, publisher: run.publishA, endpoint: run.healthy.receiver, db: run.db, runId, noteError: run.errors.note, timeline };
  if (warmupEvents > 0) {
    process.stderr.write(`warm-up: ${warmupEvents} events of A...\n`);
    await runPhase(deps, 'warmup', warmupEvents, WARMUP_DEADLINE_S);
  }

  stage.name = 'alone';
  timeline.origin = now();
  const sampling = startSampling(run.db, neighbour, run.endpointB, ledger, () => stage.name, timeline.origin);
  const total = Math.round(rate * duration);
  process.stderr.write(`phase 1: A alone, ${rate} events/s for ${duration} s\n`);
  const alone = await runPhase(deps, 'alone', total, deadlineS);

  const loadStart = now();
  await neighbour.before?.();
  stage.name = 'beside';
  process.stderr.write(`\nphase 2: A beside ${neighbour.description}, ${rate} events/s for ${duration} s\n`);
  let endPublishing = () => {};
  const besideLoad = neighbour.beside?.(new Promise<void>((resolve) => (endPublishing = resolve)));
  const beside = await runPhase(deps, 'beside', total, deadlineS, () => {
    stage.name = 'waiting';
    endPublishing();
  });
  await besideLoad;
  let neighbourDeliveries: DeliveryFigures | undefined;
  if (neighbourLedger.expected('neighbour') > 0) {
    stage.name = 'draining';
    process.stderr.write(`\nwaiting for B's ${neighbourLedger.expected('neighbour')} deliveries that must land\n`);
    neighbourDeliveries = (await awaitLandings(neighbourLedger, 'neighbour', run.endpointB.receiver, run.db, beside.publishEnd + deadlineS * 1000)).figures;
  }
  await sampling.stop();
  const end = now();
  progress(`done in ${((end - timeline.origin) / 1000).toFixed(1)} s`, true);
  endProgress();

  const result = assembleResult(run, {
    ledger,
    loadBefore,
    alone,
    beside,
    neighbourDeliveries,
    samples: sampling.samples,
    summary: await neighbour.summary(),
    loadStartS: round((loadStart - timeline.origin) / 1000, 1),
    timeline: perSecond(timeline.origin, end, [...alone.publishTimes, ...beside.publishTimes], [...alone.landed, ...beside.landed]),
  });
  writeOutputs(result, neighbour.loadLabel);
  return result;
}

type PhaseRun = Awaited<ReturnType<typeof runPhase>>;

/** The run's JSON: A's two phases and their p99 ratio, A's endpoint, B's figures and samples, and the run's settings. */
function assembleResult(
  run: Run,
  measured: {
    ledger: DeliveryLedger<Phase>;
    loadBefore: string;
    alone: PhaseRun;
    beside: PhaseRun;
    neighbourDeliveries: DeliveryFigures | undefined;
    samples: NeighbourSample[];
    summary: NeighbourSummary;
    loadStartS: number;
    timeline: SecondBin[];
  },
) {
  const { ledger, alone, beside, neighbourDeliveries } = measured;
  const aCounters = run.healthy.receiver.counters!;
  const bCounters = run.endpointB.receiver.counters!;
  const ratio = round(beside.result.latency_ms.p99 / alone.result.latency_ms.p99, 2);
  const lost = alone.result.lost + beside.result.lost + (neighbourDeliveries?.lost ?? 0);
  const lateLandedAfter = (phase: Phase, late: number) => late - ledger.waiting(phase).length;
  return {
    scenario: 'noisy-neighbour',
    neighbour_scenario: options.neighbour!.scenario,
    mode: run.target.mode,
    label: options.label,
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    host: { ...hostInfo(), load_before: measured.loadBefore, load_after: loadAverage() },
    offered_rate: options.rate,
    duration_s: options.duration,
    deadline_s: options.deadlineS,
    alone: alone.result,
    beside: beside.result,
    p99_ratio: ratio,
    p99_ratio_target: 2,
    target_met: ratio <= 2 && lost === 0 && beside.result.late === 0,
    late_landed_before_exit: { alone: lateLandedAfter('alone', alone.result.late), beside: lateLandedAfter('beside', beside.result.late) },
    healthy_endpoint: {
      host: HEALTHY_HOST,
      duplicates: aCounters.duplicates,
      invalid_signatures: aCounters.invalidSignatures,
      unexpected_deliveries: ledger.unexpected,
      requests: aCounters.requests,
      tls_connections: aCounters.tlsConnections,
    },
    neighbour: {
      scenario: options.neighbour!.scenario,
      description: run.neighbour.description,
      ...measured.summary.figures,
      started_s: measured.loadStartS,
      report: measured.summary.report,
      ...(neighbourDeliveries ? { accepted_deliveries: neighbourDeliveries } : {}),
      endpoint_host: NEIGHBOUR_HOST,
      endpoint_requests: bCounters.requests,
      endpoint_delivered: bCounters.delivered,
      endpoint_duplicates: bCounters.duplicates,
      endpoint_max_open_requests: bCounters.maxOpenRequests,
      endpoint_tls_connections: bCounters.tlsConnections,
      endpoint_invalid_signatures: bCounters.invalidSignatures,
      sample_every_s: SAMPLE_MS / 1000,
      samples: measured.samples,
    },
    lost,
    invalid_signatures: aCounters.invalidSignatures + bCounters.invalidSignatures,
    publish_errors: run.errors.log.count,
    publish_error_examples: run.errors.log.examples,
    warmup: { events: options.warmupEvents, deliveries: ledger.expected('warmup'), landed: ledger.landings('warmup').length },
    setup: { ...run.target.setup, state_dir: path.dirname(workDir) },
    service_env: { ...scenarioServiceEnv(options.neighbour!.scenario), ...options.extraEnv },
    timeline: measured.timeline,
  };
}

/** Writes the run's JSON and chart (to --out, or bench/results/<time>-…), then prints its report. */
function writeOutputs(result: ReturnType<typeof assembleResult>, loadLabel: string): void {
  const { alone, beside, neighbour } = result;
  const { scenario: name, events: count } = options.neighbour!;
  const scenario = name === 'hanging-webhook' ? '' : name;
  const events = count > 0 ? `b${count}` : '';
  const files = outputPaths(
    options.out,
    [stamp(), result.mode, 'noisy-neighbour', scenario, `r${result.offered_rate}`, `d${result.duration_s}`, events, options.label ?? ''].filter(Boolean).join('-'),
  );
  const markers = [
    { x: alone.started_s + alone.publishing_s + alone.waited_s, label: 'A alone: done' },
    { x: neighbour.started_s, label: loadLabel },
    { x: beside.started_s, label: 'A beside B' },
    { x: beside.started_s + beside.publishing_s, label: 'A beside B: publishing ends' },
  ];
  writeFileSync(files.json, `${JSON.stringify({ ...result, chart: path.relative(REPO_ROOT, files.svg) }, null, 2)}\n`);
  writeFileSync(files.svg, renderNeighbourChart(result, markers));
  printNeighbourReport(result, files);
}
