/**
 * The noisy-neighbour run of `npm run bench -- --noisy-neighbour`: does one customer's hanging
 * endpoint slow down another customer's deliveries? Two projects on one deployment (embedded, or
 * the production topology with --cluster): A's webhook on the healthy receiver, B's on a receiver
 * that reads each request and holds it past the service's 30 s limit. A publishes at a steady
 * rate alone; then B's burst is published and accepted; then A publishes again beside B's queue.
 * The run compares A's latency (publish call started → receiver got the POST) in the two phases
 * and follows B's deliveries by status, their attempts and the requests open at B's endpoint.
 *
 * Each phase waits for A's deliveries at most --deadline seconds after its publishing. A delivery
 * that has not landed by then is *late* if the service still holds it (any status but
 * `delivered` or `dead_letter`: it would land later) and *lost* otherwise; a late delivery
 * counts in the percentiles at the time it had waited, so they are lower bounds then.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { inArray } from 'drizzle-orm';
import { openDatabase } from '../src/db/client.ts';
import { deliveries } from '../src/db/schema.ts';
import { statusCounts } from '../test/faults/workload.ts';
import type { Outcome } from './ceiling.ts';
import { DeliveryLedger, type Landing } from './lib/ledger.ts';
import { isInterrupted, killOnExit, onCleanup, workDir } from './lib/lifecycle.ts';
import { formatStatuses, printNeighbourReport, renderNeighbourChart, type NeighbourSample, type PhaseResult } from './lib/neighbour-report.ts';
import { options } from './lib/options.ts';
import { endProgress, hostInfo, loadAverage, now, outputPaths, progress, sleep, stamp } from './lib/output.ts';
import { fireAtRate } from './lib/pacing.ts';
import { createProject } from './lib/projects.ts';
import { createPublisher } from './lib/publisher.ts';
import { startCertifiedReceiver } from './lib/receiver-client.ts';
import { REPO_ROOT } from './lib/stack.ts';
import { percentiles, perSecond, round } from './lib/stats.ts';
import { clusterTarget, serviceTarget } from './lib/targets.ts';

/** How often B's deliveries are counted. */
const SAMPLE_MS = 5_000;
/** How long the warm-up waits for its deliveries. */
const WARMUP_DEADLINE_S = 60;

type Phase = 'warmup' | 'alone' | 'beside';

/** Runs the scenario, prints its report, writes its JSON and chart; `lost` and `invalid_signatures` decide the exit status. */
export async function runNoisyNeighbour(): Promise<Outcome> {
  const { rate, duration, deadlineS, maxInFlight, warmupEvents } = options;
  const neighbour = options.neighbour!;
  const loadBefore = loadAverage();
  const runId = randomBytes(4).toString('hex');
  const ledger = new DeliveryLedger<Phase>();

  // The two customers' endpoints: A's answers at once, B's holds every request.
  const { receiver: healthy, certFile } = await startCertifiedReceiver(workDir, { failRatio: 0, failCap: 0 }, (batch) => {
    for (let i = 0; i < batch.ids.length; i += 1) {
      if (batch.status[i] === 200 && batch.dup[i] === 0) ledger.landed(batch.ids[i]!, batch.t[i]!);
    }
  });
  killOnExit(healthy.pid);
  onCleanup(() => healthy.stop());
  // The most requests open at B's endpoint since the last sample (its batches come every 100 ms).
  let openPeak = 0;
  const { receiver: hanging } = await startCertifiedReceiver(workDir, { failRatio: 0, failCap: 0, holdMs: neighbour.holdS * 1000 }, (batch) => {
    openPeak = Math.max(openPeak, batch.counters.openRequests);
  });
  killOnExit(hanging.pid);
  onCleanup(() => hanging.stop());

  const plan = options.cluster ? clusterTarget({ caFile: certFile, nodeArgs: [] }, options.cluster) : serviceTarget({ caFile: certFile, nodeArgs: [] });
  const target = await plan.start();
  const database = await openDatabase({ kind: 'postgres', url: target.databaseUrl, poolMax: 1 });
  onCleanup(() => database.close());
  const a = await createProject(database.db, target.apiUrls, `bench-${runId}-a`, [`${healthy.url}/hooks/0`]);
  const b = await createProject(database.db, target.apiUrls, `bench-${runId}-b`, [`${hanging.url}/hooks/0`]);
  healthy.setSecrets([a.webhooks[0]!.secret]);
  hanging.setSecrets([b.webhooks[0]!.secret]);
  const publishA = createPublisher(target.apiUrls, a.producerKey, a.projectId, 64);
  const publishB = createPublisher(target.apiUrls, b.producerKey, b.projectId, 64);
  onCleanup(async () => {
    publishA.close();
    publishB.close();
  });

  const publishErrors: string[] = [];
  let publishErrorCount = 0;
  const noteError = (error: string | undefined) => {
    if (!error) return;
    publishErrorCount += 1;
    if (publishErrors.length < 5) publishErrors.push(error);
  };

  /** A's deliveries of `phase` that have not landed, as late (the service still holds them) or lost. */
  const unlanded = async (phase: Phase) => {
    const waiting = ledger.waiting(phase);
    const rows =
      waiting.length === 0
        ? []
        : await database.db.select({ id: deliveries.id, status: deliveries.status }).from(deliveries).where(inArray(deliveries.id, waiting.map((w) => w.id)));
    // Read after the statuses: a delivery the service marked delivered has been reported by now.
    await healthy.flush();
    const status = new Map(rows.map((row) => [row.id, row.status as string]));
    const gone = (id: string) => [undefined, 'delivered', 'dead_letter'].includes(status.get(id));
    const still = ledger.waiting(phase);
    return { late: still.filter((w) => !gone(w.id)), lost: still.filter((w) => gone(w.id)) };
  };

  /** Publishes `total` events of A at the rate, waits for their deliveries (at most `waitS`), and sums the phase up. */
  const runPhase = async (phase: Phase, total: number, waitS: number, onPublished: () => void = () => {}) => {
    const publishTimes: number[] = [];
    const publishMs: number[] = [];
    const started = now();
    const stalls = await fireAtRate(rate, total, maxInFlight, async (seq) => {
      const at = now();
      publishTimes.push(at);
      const result = await publishA.publish(seq, `${phase}-${runId}`);
      publishMs.push(now() - at);
      noteError(result.error);
      for (const id of result.deliveryIds) ledger.sent(id, phase, at);
    });
    const publishEnd = now();
    onPublished();
    const deadline = publishEnd + waitS * 1000;
    while (ledger.landings(phase).length < ledger.expected(phase) && now() < deadline && !isInterrupted()) await sleep(100);
    const { late, lost } = await unlanded(phase);
    const waitEnd = now();
    const landed: Landing[] = ledger.landings(phase).slice();
    return {
      landed,
      publishTimes,
      result: {
        events_published: publishTimes.length,
        publish_cap_stalls: stalls,
        deliveries_expected: ledger.expected(phase),
        delivered: landed.length,
        late: late.length,
        lost: lost.length,
        lost_ids: lost.slice(0, 10).map((w) => w.id),
        latency_ms: percentiles([...landed.map((l) => l.latency), ...late.map((w) => waitEnd - w.at)]),
        latency_is_lower_bound: late.length > 0,
        publish_ms: percentiles(publishMs),
        started_s: round((started - origin) / 1000, 1),
        publishing_s: round((publishEnd - started) / 1000, 1),
        waited_s: round((waitEnd - publishEnd) / 1000, 1),
      } satisfies PhaseResult,
    };
  };

  // Zero of the run's timeline (the phases' `started_s`, the samples' `t`): phase 1's start.
  let origin = now();
  if (warmupEvents > 0) {
    process.stderr.write(`warm-up: ${warmupEvents} events of A...\n`);
    await runPhase('warmup', warmupEvents, WARMUP_DEADLINE_S);
  }

  // B's deliveries and endpoint, sampled from phase 1's start to the end.
  let stage = 'alone';
  origin = now();
  const samples: NeighbourSample[] = [];
  const sample = async () => {
    const { total, attempts, ...statuses } = await statusCounts(database, b.webhooks[0]!.id);
    const counters = hanging.counters;
    samples.push({
      t: round((now() - origin) / 1000, 1),
      stage,
      deliveries: total,
      statuses,
      attempts,
      endpoint_requests: counters?.requests ?? 0,
      open_requests: counters?.openRequests ?? 0,
      open_requests_peak: openPeak,
    });
    openPeak = counters?.openRequests ?? 0;
  };
  await sample();
  let sampling: Promise<void> | undefined;
  const sampler = setInterval(() => {
    sampling ??= sample()
      .catch((error: unknown) => console.error(`\ncounting B's deliveries failed: ${String(error)}`))
      .finally(() => (sampling = undefined));
  }, SAMPLE_MS);
  const ticker = setInterval(() => {
    const last = samples.at(-1);
    const phase: Phase = stage === 'alone' ? 'alone' : 'beside';
    progress(
      `${stage} ${((now() - origin) / 1000).toFixed(0)}s  A delivered ${ledger.landings(phase).length}/${ledger.expected(phase)}  |  B ${formatStatuses(last)}, attempts ${last?.attempts ?? 0}, open at its endpoint ${hanging.counters?.openRequests ?? 0}`,
    );
  }, 1000);

  const total = Math.round(rate * duration);
  process.stderr.write(`phase 1: A alone, ${rate} events/s for ${duration} s\n`);
  const alone = await runPhase('alone', total, deadlineS);

  stage = 'burst';
  process.stderr.write(`\nB's burst: ${neighbour.events} events at ${neighbour.rate}/s to the endpoint that holds requests ${neighbour.holdS} s\n`);
  const burstStart = now();
  let accepted = 0;
  const burstStalls = await fireAtRate(neighbour.rate, neighbour.events, maxInFlight, async (seq) => {
    const result = await publishB.publish(seq, `neighbour-${runId}`);
    noteError(result.error);
    if (!result.error) accepted += 1;
  });
  const burstEnd = now();
  if (neighbour.settleS > 0) {
    stage = 'settling';
    process.stderr.write(`\nB's deliveries settle into its queue for ${neighbour.settleS} s\n`);
    await sleep(neighbour.settleS * 1000);
  }

  stage = 'beside';
  process.stderr.write(`\nphase 2: A beside B's queue, ${rate} events/s for ${duration} s\n`);
  const beside = await runPhase('beside', total, deadlineS, () => (stage = 'waiting'));
  clearInterval(ticker);
  clearInterval(sampler);
  await sampling;
  await sample();
  const end = now();
  progress(`done in ${((end - origin) / 1000).toFixed(1)} s`, true);
  endProgress();

  const lateLandedAfter = (phase: Phase, late: number) => late - ledger.waiting(phase).length;
  const aCounters = healthy.counters!;
  const bCounters = hanging.counters!;
  const ratio = round(beside.result.latency_ms.p99 / alone.result.latency_ms.p99, 2);
  const lost = alone.result.lost + beside.result.lost;
  const result = {
    scenario: 'noisy-neighbour',
    mode: target.mode,
    label: options.label,
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    host: { ...hostInfo(), load_before: loadBefore, load_after: loadAverage() },
    offered_rate: rate,
    duration_s: duration,
    deadline_s: deadlineS,
    alone: alone.result,
    beside: beside.result,
    p99_ratio: ratio,
    p99_ratio_target: 2,
    target_met: ratio <= 2 && lost === 0 && beside.result.late === 0,
    late_landed_before_exit: { alone: lateLandedAfter('alone', alone.result.late), beside: lateLandedAfter('beside', beside.result.late) },
    healthy_endpoint: {
      duplicates: aCounters.duplicates,
      invalid_signatures: aCounters.invalidSignatures,
      unexpected_deliveries: ledger.unexpected,
      requests: aCounters.requests,
      tls_connections: aCounters.tlsConnections,
    },
    neighbour: {
      events: neighbour.events,
      accepted,
      publish_rate: neighbour.rate,
      publish_s: round((burstEnd - burstStart) / 1000, 1),
      publish_cap_stalls: burstStalls,
      started_s: round((burstStart - origin) / 1000, 1),
      hold_s: neighbour.holdS,
      settle_s: neighbour.settleS,
      endpoint_requests: bCounters.requests,
      endpoint_max_open_requests: bCounters.maxOpenRequests,
      endpoint_tls_connections: bCounters.tlsConnections,
      endpoint_invalid_signatures: bCounters.invalidSignatures,
      sample_every_s: SAMPLE_MS / 1000,
      samples,
    },
    lost,
    invalid_signatures: aCounters.invalidSignatures + bCounters.invalidSignatures,
    publish_errors: publishErrorCount,
    publish_error_examples: publishErrors,
    warmup: { events: warmupEvents, deliveries: ledger.expected('warmup'), landed: ledger.landings('warmup').length },
    setup: { ...target.setup, state_dir: path.dirname(workDir) },
    service_env: options.extraEnv,
    timeline: perSecond(origin, end, [...alone.publishTimes, ...beside.publishTimes], [...alone.landed, ...beside.landed]),
  };

  const files = outputPaths(
    options.out,
    [stamp(), target.mode, 'noisy-neighbour', `r${rate}`, `d${duration}`, `b${neighbour.events}`, options.label ?? ''].filter(Boolean).join('-'),
  );
  const markers = [
    { x: alone.result.started_s + alone.result.publishing_s + alone.result.waited_s, label: 'A alone: done' },
    { x: result.neighbour.started_s, label: "B's burst" },
    { x: beside.result.started_s, label: 'A beside B' },
    { x: beside.result.started_s + beside.result.publishing_s, label: 'A beside B: publishing ends' },
  ];
  writeFileSync(files.json, `${JSON.stringify({ ...result, chart: path.relative(REPO_ROOT, files.svg) }, null, 2)}\n`);
  writeFileSync(files.svg, renderNeighbourChart(result, markers));
  printNeighbourReport(result, files);
  return result;
}
