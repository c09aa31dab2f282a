/**
 * The neighbours of the noisy-neighbour run (`--neighbour-scenario`, bench/noisy-neighbour.ts):
 * what project B does while the healthy project A's latency is measured. One function per
 * scenario makes B's projects, webhooks and endpoint (on 127.0.0.1, another host than A's) and
 * returns B's load and figures; the driver runs the phases, samples B's deliveries and reports.
 */
import type { Database } from '../../src/db/client.ts';
import { statusCounts } from '../../test/faults/workload.ts';
import type { ReceiverBehaviour } from '../receiver.ts';
import { isInterrupted, onCleanup } from './lifecycle.ts';
import { options, type NeighbourScenario, type NeighbourSettings } from './options.ts';
import { now, sleep } from './output.ts';
import { fireAtRate } from './pacing.ts';
import { waitForQuietMachine } from './procstat.ts';
import { createProject, type BenchProject } from './projects.ts';
import { createPublisher, type EventPublisher } from './publisher.ts';
import type { ReceiverHandle } from './receiver-client.ts';
import { round } from './stats.ts';

/** What the driver gives a scenario. */
export interface NeighbourContext {
  readonly settings: NeighbourSettings;
  /** Distinguishes this run's project ids and producer event ids. */
  readonly runId: string;
  readonly apiUrls: readonly string[];
  readonly db: Database;
  /** Starts B's endpoint (once): a bench/receiver.ts process on 127.0.0.1 with the run's certificate. */
  startEndpoint(behaviour: ReceiverBehaviour): Promise<ReceiverHandle>;
  /** A delivery of B's that must reach B's endpoint (publish-flood's accepted events): late or lost otherwise. */
  expectDelivery(id: string, publishedAt: number): void;
  /** A publish call that failed (a refusal with 429 is a scenario's figure, not an error). */
  noteError(error: string | undefined): void;
  /** Names what the run does now, in the samples and the progress line. */
  setStage(stage: string): void;
}

/** B's summary at the end: its figures for the JSON, and the report's rows (label → value). */
export interface NeighbourSummary {
  figures: Record<string, unknown>;
  report: Record<string, string>;
}

/** B, set up, as the driver runs it. */
export interface Neighbour {
  /** What B is, for the report's titles. */
  readonly description: string;
  /** The chart's marker where B's load starts. */
  readonly loadLabel: string;
  /** B's webhooks: their deliveries are counted by status every 5 s. */
  readonly webhookIds: readonly string[];
  /** B's load before A's second phase (a burst and its settling; a backlog of dead letters). */
  before?(): Promise<void>;
  /** B's load during A's second phase; `publishingEnded` resolves when A's publishing ends. */
  beside?(publishingEnded: Promise<void>): Promise<void>;
  /** B's own cumulative counts, sampled every 5 s beside its deliveries' statuses. */
  progress?(): Promise<Record<string, number>>;
  summary(): Promise<NeighbourSummary>;
}

type NeighbourSetUp = (context: NeighbourContext) => Promise<Neighbour>;

/** The projects of B, `webhooksEach` webhooks each, all on `endpoint` (webhook i of them all on the path `/hooks/i`). */
async function createNeighbourProjects(
  context: NeighbourContext,
  endpoint: ReceiverHandle,
  projects: number,
  webhooksEach: number,
  quota: { publishRate?: number } = {},
): Promise<BenchProject[]> {
  const created: BenchProject[] = [];
  for (let p = 0; p < projects; p += 1) {
    const urls = Array.from({ length: webhooksEach }, (_, w) => `${endpoint.url}/hooks/${p * webhooksEach + w}`);
    created.push(await createProject(context.db, context.apiUrls, `bench-${context.runId}-b${projects > 1 ? p : ''}`, urls, quota));
  }
  endpoint.setSecrets(created.flatMap((project) => project.webhooks.map((webhook) => webhook.secret)));
  return created;
}

function openPublisher(context: NeighbourContext, project: BenchProject, maxSockets: number): EventPublisher {
  const publisher = createPublisher(context.apiUrls, project.producerKey, project.projectId, maxSockets);
  onCleanup(async () => publisher.close());
  return publisher;
}

/** B's `events` published at --neighbour-rate, spread round robin over `publishers`; the burst's figures. */
async function publishBurst(context: NeighbourContext, publishers: EventPublisher[], events: number) {
  const { rate } = context.settings;
  const started = now();
  let accepted = 0;
  const stalls = await fireAtRate(rate, events, options.maxInFlight, async (seq) => {
    const result = await publishers[seq % publishers.length]!.publish(seq, `neighbour-${context.runId}`);
    context.noteError(result.error);
    if (!result.error) accepted += 1;
  });
  return { events, accepted, publish_rate: rate, publish_s: round((now() - started) / 1000, 1), publish_cap_stalls: stalls };
}

/**
 * Scenarios 1–3: B's `projects` projects of `webhooksEach` webhooks each, all on ONE endpoint that
 * holds every request --neighbour-hold seconds (past the service's 30 s limit). B's burst is
 * accepted, then settles --neighbour-settle seconds, before A's second phase.
 */
async function hangingNeighbour(context: NeighbourContext, projects: number, webhooksEach: number): Promise<Neighbour> {
  const { events, holdS, settleS, settleUntilQuiet, rate } = context.settings;
  let settledS = settleS;
  const endpoint = await context.startEndpoint({ failRatio: 0, failCap: 0, holdMs: holdS * 1000 });
  const created = await createNeighbourProjects(context, endpoint, projects, webhooksEach);
  const publishers = created.map((project) => openPublisher(context, project, 64));
  const webhooks = projects * webhooksEach;
  const owner = projects > 1 ? `B's ${projects} projects' ` : "B's ";
  const fanOut = webhooksEach > 1 ? ` × ${webhooksEach} webhooks (${events * webhooksEach} deliveries)` : projects > 1 ? ' (one webhook each)' : '';
  let burst: Awaited<ReturnType<typeof publishBurst>> | undefined;
  return {
    description: `${owner}${events} events${fanOut} to ${webhooks > 1 ? 'one endpoint' : 'an endpoint'} that holds each request ${holdS} s`,
    loadLabel: "B's burst",
    webhookIds: created.flatMap((project) => project.webhooks.map((webhook) => webhook.id)),
    async before() {
      context.setStage('burst');
      process.stderr.write(`\nB's burst: ${events} events at ${rate}/s to ${webhooks} webhook(s) on the endpoint that holds requests ${holdS} s\n`);
      burst = await publishBurst(context, publishers, events);
      if (settleS > 0) {
        context.setStage('settling');
        process.stderr.write(`\nB's deliveries settle into its queue for ${settleS} s${settleUntilQuiet ? ', then until the machine is quiet' : ''}\n`);
        await sleep(settleS * 1000);
        if (settleUntilQuiet) settledS = settleS + (await waitForQuietMachine());
      }
    },
    async summary() {
      return {
        figures: { ...burst, projects, webhooks_per_project: webhooksEach, deliveries: (burst?.accepted ?? 0) * webhooksEach, hold_s: holdS, settle_s: round(settledS, 1) },
        report: {
          'B: events accepted': `${burst?.accepted ?? 0} of ${events} in ${burst?.publish_s ?? 0} s`,
          "B: settled (its deliveries taken in) before A's second phase": `${round(settledS, 1)} s`,
        },
      };
    },
  };
}

/** 1. Today's scenario: one project, one webhook on the hanging endpoint. */
const hangingWebhook: NeighbourSetUp = (context) => hangingNeighbour(context, 1, 1);

/** 2. One project with --neighbour-webhooks webhooks on one hanging endpoint: each event is delivered to every webhook. */
const manyWebhooks: NeighbourSetUp = (context) => hangingNeighbour(context, 1, context.settings.webhooks);

/** 3. --neighbour-projects projects of one webhook each, all on one hanging endpoint; the events are spread over them. */
const manyProjects: NeighbourSetUp = (context) => hangingNeighbour(context, context.settings.projects, 1);

/**
 * 4. During A's second phase, B publishes back to back on --neighbour-connections connections, to
 * a healthy endpoint of its own. An event refused with 429 (a publish quota) is a figure, not an
 * error, and is not expected at B's endpoint; every accepted one is (the driver waits for them).
 */
async function publishFlood(context: NeighbourContext): Promise<Neighbour> {
  const { connections } = context.settings;
  const endpoint = await context.startEndpoint({ failRatio: 0, failCap: 0 });
  const [project] = await createNeighbourProjects(context, endpoint, 1, 1);
  const publisher = openPublisher(context, project!, connections);
  const counts = { accepted: 0, refused: 0, failed: 0 };
  const retryAfter = new Set<string>();
  let refusalExample: string | undefined;
  let floodMs = 0;
  return {
    description: `B publishing back to back on ${connections} connections`,
    loadLabel: "B's flood",
    webhookIds: [project!.webhooks[0]!.id],
    async beside(publishingEnded) {
      let ended = false;
      void publishingEnded.then(() => (ended = true));
      const started = now();
      let seq = 0;
      const lane = async () => {
        while (!ended && !isInterrupted()) {
          const at = now();
          const result = await publisher.publish(seq++, `flood-${context.runId}`);
          if (!result.error) {
            counts.accepted += 1;
            for (const id of result.deliveryIds) context.expectDelivery(id, at);
          } else if (result.status === 429) {
            counts.refused += 1;
            refusalExample ??= result.error;
            if (result.retryAfter && retryAfter.size < 10) retryAfter.add(result.retryAfter);
          } else {
            counts.failed += 1;
            context.noteError(result.error);
          }
        }
      };
      await Promise.all(Array.from({ length: connections }, lane));
      floodMs = now() - started;
    },
    progress: async () => ({ accepted: counts.accepted, refused: counts.refused }),
    async summary() {
      const attempted = counts.accepted + counts.refused + counts.failed;
      const refusedRate = attempted ? round((100 * counts.refused) / attempted, 1) : 0;
      const seconds = floodMs / 1000;
      return {
        figures: {
          connections,
          publish_s: round(seconds, 1),
          events_attempted: attempted,
          accepted: counts.accepted,
          refused_429: counts.refused,
          refused_percent: refusedRate,
          failed: counts.failed,
          accepted_per_s: seconds ? round(counts.accepted / seconds, 1) : 0,
          refused_per_s: seconds ? round(counts.refused / seconds, 1) : 0,
          retry_after_values: [...retryAfter],
          refusal_example: refusalExample,
        },
        report: {
          'B: events accepted / refused (429)': `${counts.accepted} / ${counts.refused} of ${attempted} in ${round(seconds, 1)} s on ${connections} connections (refused ${refusedRate}%; accepted ${seconds ? round(counts.accepted / seconds, 1) : 0}/s)`,
          ...(retryAfter.size ? { 'B: Retry-After': [...retryAfter].join(', ') } : {}),
        },
      };
    },
  };
}

/** A bulk retry operation as the API shows it. */
interface Operation {
  id: string;
  status: string;
  matched: number;
  retried: number;
  skipped: number;
}

/**
 * 5. B's --neighbour-events events are dead-lettered before A's second phase (B's endpoint answers
 * 500 until they all are; the retry schedule and the circuit breaker set the pace); then the
 * endpoint answers 200 and --neighbour-operations bulk retries start one after another as A's
 * second phase does. A refused start (409 while another runs, say) is recorded; the others go on.
 */
async function bulkRetry(context: NeighbourContext): Promise<Neighbour> {
  const { events, operations: wanted } = context.settings;
  const endpoint = await context.startEndpoint({ failRatio: 1, failCap: 0 });
  const [project] = await createNeighbourProjects(context, endpoint, 1, 1);
  const webhookId = project!.webhooks[0]!.id;
  const publisher = openPublisher(context, project!, 64);
  const api = async <Data>(method: 'GET' | 'POST', path: string, body?: unknown) => {
    const res = await fetch(`${context.apiUrls[0]}/api-gateway/v2/webhooks/${webhookId}${path}`, {
      method,
      headers: { Authorization: `Bearer ${project!.apiToken}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as { data?: Data; error?: { code?: string } } | undefined };
  };
  let burst: Awaited<ReturnType<typeof publishBurst>> | undefined;
  const backlog = { dead_letter: 0, s: 0, complete: false };
  const operations: Operation[] = [];
  const refused: { status: number; code: string | undefined }[] = [];
  const poll = async () => {
    for (const [i, operation] of operations.entries()) {
      const answer = await api<Operation>('GET', `/operations/${operation.id}`);
      if (answer.status === 200 && answer.body?.data) operations[i] = answer.body.data;
    }
  };
  return {
    description: `B's ${events} dead letters retried by ${wanted} bulk retry operation(s)`,
    loadLabel: "B's backlog",
    webhookIds: [webhookId],
    async before() {
      context.setStage('backlog');
      process.stderr.write(`\nB's backlog: ${events} events to an endpoint that answers 500, until they are all dead letters\n`);
      const started = now();
      burst = await publishBurst(context, [publisher], events);
      const deadline = started + options.deadlineS * 1000;
      while (backlog.dead_letter < burst.accepted && now() < deadline && !isInterrupted()) {
        await sleep(1000);
        backlog.dead_letter = (await statusCounts({ db: context.db }, webhookId)).dead_letter ?? 0;
      }
      backlog.complete = backlog.dead_letter >= burst.accepted;
      backlog.s = round((now() - started) / 1000, 1);
      if (!backlog.complete) process.stderr.write(`\nonly ${backlog.dead_letter} of ${burst.accepted} dead letters after ${backlog.s} s: retrying those\n`);
      endpoint.setBehaviour({ failRatio: 0 });
    },
    async beside() {
      for (let i = 0; i < wanted; i += 1) {
        const answer = await api<Omit<Operation, 'retried' | 'skipped'>>('POST', '/deliveries/retry', { status: ['dead_letter'] });
        if (answer.status === 202 && answer.body?.data) operations.push({ retried: 0, skipped: 0, ...answer.body.data });
        else refused.push({ status: answer.status, code: answer.body?.error?.code });
      }
    },
    async progress() {
      await poll();
      const sum = (key: 'matched' | 'retried' | 'skipped') => operations.reduce((n, operation) => n + operation[key], 0);
      return { matched: sum('matched'), retried: sum('retried'), skipped: sum('skipped') };
    },
    async summary() {
      await poll();
      const shown = (operation: Operation) => `${operation.status} (matched ${operation.matched}, retried ${operation.retried}, skipped ${operation.skipped})`;
      const refusals = refused.map((refusal) => `${refusal.status}${refusal.code ? ` ${refusal.code}` : ''}`);
      return {
        figures: { ...burst, backlog, operations_wanted: wanted, operations, operations_refused: refused },
        report: {
          'B: dead letters before the retries': `${backlog.dead_letter} of ${burst?.accepted ?? 0} accepted events, in ${backlog.s} s${backlog.complete ? '' : ' (incomplete at --deadline)'}`,
          'B: bulk retries': `${operations.length} of ${wanted} started${refusals.length ? `, refused: ${refusals.join(', ')}` : ''}; ${operations.map(shown).join('; ') || 'none'}`,
        },
      };
    },
  };
}

/**
 * 6. B publishes its --neighbour-events events at --neighbour-rate (its own publish quota) to an
 * endpoint that answers 500: its breaker opens, and its deliveries wait in its line and in their
 * retry backoff, or reach dead_letter. As A's second phase starts the endpoint answers 200 again,
 * and what B has left goes out beside A: what one customer's outage ending costs the others.
 */
async function endpointRecovery(context: NeighbourContext): Promise<Neighbour> {
  const { events, rate } = context.settings;
  const endpoint = await context.startEndpoint({ failRatio: 1, failCap: 0 });
  // B's outage backlog is the scenario, not its quota: the operator gave it one of its rate.
  const [project] = await createNeighbourProjects(context, endpoint, 1, 1, { publishRate: rate });
  const webhookId = project!.webhooks[0]!.id;
  const publisher = openPublisher(context, project!, 64);
  let burst: Awaited<ReturnType<typeof publishBurst>> | undefined;
  let atRecovery: Record<string, number> = {};
  return {
    description: `B's ${events} events at ${rate}/s to an endpoint that answers 500, which recovers as A's second phase starts`,
    loadLabel: "B's endpoint recovers",
    webhookIds: [webhookId],
    async before() {
      context.setStage('outage');
      process.stderr.write(`
B's outage: ${events} events at ${rate}/s to an endpoint that answers 500
`);
      burst = await publishBurst(context, [publisher], events);
      atRecovery = await statusCounts({ db: context.db }, webhookId);
      endpoint.setBehaviour({ failRatio: 0 });
    },
    async summary() {
      const left = Object.entries(atRecovery).map(([status, count]) => `${status} ${count}`).join(', ');
      return {
        figures: { ...burst, at_recovery: atRecovery },
        report: {
          'B: events accepted during the outage': `${burst?.accepted ?? 0} of ${events} in ${burst?.publish_s ?? 0} s`,
          "B's deliveries when its endpoint recovered": left || 'none',
        },
      };
    },
  };
}

/** Every scenario of `--neighbour-scenario`, by name. */
export const NEIGHBOURS: Record<NeighbourScenario, NeighbourSetUp> = {
  'hanging-webhook': hangingWebhook,
  'many-webhooks': manyWebhooks,
  'many-projects': manyProjects,
  'publish-flood': publishFlood,
  'bulk-retry': bulkRetry,
  'endpoint-recovery': endpointRecovery,
};
