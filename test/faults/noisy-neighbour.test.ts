import { expect, it } from 'vitest';
import { percentiles } from '../../bench/lib/stats.ts';
import { DedupeReceiver } from './receiver.ts';
import { finish, useScenario } from './scenario.ts';
import { createWebhook, Publisher, statusCounts, waitUntilSettled } from './workload.ts';

const scenario = useScenario('noisy-neighbour');

/** The neighbour's endpoint holds every request this long: past the service's 30 s limit, so each send to it times out. */
const HANG_MS = 45_000;
/** Deliveries queued for the hanging endpoint before the healthy webhook's traffic starts. */
const NEIGHBOUR_EVENTS = 200;
/** The healthy webhook's steady traffic: 5 events a second for 20 s. */
const HEALTHY_EVENTS = 100;
const HEALTHY_RATE = 5;
/**
 * How long the healthy webhook's deliveries may take to land. Without isolation between
 * customers they wait behind the neighbour's sends, each holding a worker's activity slot for
 * 30 s (minutes in all); isolated, they land as they are published.
 */
const SETTLE_TIMEOUT_MS = 300_000;

it("delivers every event of a healthy webhook at a steady rate while another project's endpoint hangs with 200 deliveries queued", async () => {
  const { cluster, receiver, webhook } = scenario;
  const hanging = new DedupeReceiver(receiver);
  hanging.latencyMs = HANG_MS;
  await hanging.start();
  try {
    const neighbour = await createWebhook(cluster, hanging);
    const burst = new Publisher({ cluster, webhook: neighbour, count: NEIGHBOUR_EVENTS, prefix: 'neighbour' });
    await burst.done;
    expect(burst.accepted).toBe(NEIGHBOUR_EVENTS);

    const publisher = new Publisher({ cluster, webhook, count: HEALTHY_EVENTS, ratePerSecond: HEALTHY_RATE, prefix: 'healthy' });
    const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: SETTLE_TIMEOUT_MS });
    // Printed, not asserted: speed goals live in the benchmark (npm run bench -- --noisy-neighbour).
    const acceptedToReceived = percentiles(
      publisher.records.map((record) => receiver.seen.get(record.accepted!.deliveryIds[0]!)!.firstAt - record.accepted!.at),
    );
    // The damage is the neighbour's queue (its burst); the healthy traffic starting is where recovery is counted from.
    await finish(
      'noisy neighbour (hanging endpoint)',
      scenario,
      [publisher],
      { startedAt: burst.startedAt, damagedAt: burst.startedAt, repairedAt: publisher.startedAt, settledAt: settled.at },
      {
        healthyAcceptedToReceivedMs: acceptedToReceived,
        neighbourEvents: NEIGHBOUR_EVENTS,
        neighbourDeliveries: await statusCounts(cluster, neighbour.webhookId),
        neighbourEndpointRequests: hanging.requests,
        neighbourEndpointMaxOpenRequests: hanging.maxOpenRequests,
      },
    );
  } finally {
    await hanging.close();
  }
}, SETTLE_TIMEOUT_MS + 120_000);
