/**
 * The noisy-neighbour scenarios of the fault suite: another customer's deliveries queue for an
 * endpoint that hangs, while a healthy webhook publishes at a steady rate. The neighbour's
 * webhooks (one, many in one project, or one in each of many projects) all point at ONE hanging
 * endpoint on 127.0.0.1 (a path each); the healthy webhook is the scenario's own, on 127.0.0.2,
 * another destination host. Every healthy delivery must arrive; speed goals live in the
 * benchmark (`npm run bench -- --noisy-neighbour --neighbour-scenario …`).
 */
import { expect } from 'vitest';
import { percentiles } from '../../bench/lib/stats.ts';
import { DedupeReceiver } from './receiver.ts';
import { finish, type ScenarioContext } from './scenario.ts';
import { createWebhook, Publisher, statusCounts, waitUntilSettled, type ScenarioWebhook } from './workload.ts';

/** Where the healthy webhook's receiver listens (the scenario's `useScenario(…, HEALTHY_HOST)`); the hanging one is on 127.0.0.1. */
export const HEALTHY_HOST = '127.0.0.2';

/** The neighbour's endpoint holds every request this long: past the service's 30 s limit, so each send to it times out. */
const HANG_MS = 45_000;
/** The healthy webhook's steady traffic: 5 events a second for 20 s. */
const HEALTHY_EVENTS = 100;
const HEALTHY_RATE = 5;
/**
 * How long the healthy webhook's deliveries may take to land. Without isolation between
 * customers they wait behind the neighbour's sends, each holding a worker's activity slot for
 * 30 s (minutes in all); isolated, they land as they are published.
 */
export const SETTLE_TIMEOUT_MS = 300_000;
/** The test's timeout: the settle timeout and the neighbour's set-up and burst. */
export const NEIGHBOUR_TEST_TIMEOUT_MS = SETTLE_TIMEOUT_MS + 120_000;

/** The neighbour: `projects` projects of `webhooksPerProject` webhooks each, and its events (each delivered to every webhook of its project). */
export interface NeighbourShape {
  projects: number;
  webhooksPerProject: number;
  /** In all, spread evenly over the projects. */
  events: number;
}

/** The neighbour's webhooks, project by project, all on `hanging` (webhook i on the path `/i`). */
async function createNeighbour(scenario: ScenarioContext, hanging: DedupeReceiver, shape: NeighbourShape): Promise<ScenarioWebhook[][]> {
  const projects: ScenarioWebhook[][] = [];
  for (let p = 0; p < shape.projects; p += 1) {
    const keys = await scenario.cluster.createKey();
    const webhooks: ScenarioWebhook[] = [];
    for (let w = 0; w < shape.webhooksPerProject; w += 1) {
      webhooks.push(await createWebhook(scenario.cluster, hanging, { keys, path: `/${p * shape.webhooksPerProject + w}` }));
    }
    projects.push(webhooks);
  }
  return projects;
}

/**
 * Queues the neighbour's burst for the hanging endpoint, then publishes the healthy webhook's
 * steady traffic and asserts, with the suite's accounting, that every healthy delivery arrives
 * (lost 0, every one `delivered`, signatures valid, the database agreeing with the receiver). It
 * prints the healthy 202→received latency and the neighbour's deliveries by status, without
 * asserting speed.
 */
export async function noisyNeighbour(name: string, scenario: ScenarioContext, shape: NeighbourShape): Promise<void> {
  const { cluster, receiver, webhook } = scenario;
  const hanging = new DedupeReceiver(receiver, '127.0.0.1');
  hanging.latencyMs = HANG_MS;
  await hanging.start();
  try {
    const projects = await createNeighbour(scenario, hanging, shape);
    const startedAt = Date.now();
    const bursts = projects.map(
      (webhooks, p) =>
        new Publisher({
          cluster,
          webhook: webhooks[0]!,
          count: Math.floor(shape.events / shape.projects) + (p < shape.events % shape.projects ? 1 : 0),
          prefix: `neighbour-${p}`,
        }),
    );
    await Promise.all(bursts.map((burst) => burst.done));
    expect(bursts.reduce((n, burst) => n + burst.accepted, 0)).toBe(shape.events);

    const publisher = new Publisher({ cluster, webhook, count: HEALTHY_EVENTS, ratePerSecond: HEALTHY_RATE, prefix: 'healthy' });
    const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: SETTLE_TIMEOUT_MS });
    // Printed, not asserted: speed goals live in the benchmark.
    const acceptedToReceived = percentiles(
      publisher.records.map((record) => receiver.seen.get(record.accepted!.deliveryIds[0]!)!.firstAt - record.accepted!.at),
    );
    // The damage is the neighbour's queue (its burst); the healthy traffic starting is where recovery is counted from.
    await finish(name, scenario, [publisher], { startedAt, damagedAt: startedAt, repairedAt: publisher.startedAt, settledAt: settled.at }, {
      healthyHost: HEALTHY_HOST,
      healthyAcceptedToReceivedMs: acceptedToReceived,
      neighbour: { ...shape, host: '127.0.0.1', webhooks: projects.flat().length },
      neighbourDeliveries: await statusCounts(cluster, projects.flat().map((w) => w.webhookId)),
      neighbourEndpointRequests: hanging.requests,
      neighbourEndpointMaxOpenRequests: hanging.maxOpenRequests,
    });
  } finally {
    await hanging.close();
  }
}
