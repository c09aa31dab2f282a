import { Connection, Client } from '@temporalio/client';
import { and, eq } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { deliveries } from '../../src/db/schema.ts';
import { connectToTemporal } from '../../src/temporal/connection.ts';
import { finish, useProductionScenario } from './scenario.ts';
import { waitFor } from '../support/wait.ts';
import { Publisher, statusCounts, waitUntilSettled } from './workload.ts';

/** Longer than the send activity's heartbeat timeout (10 s): Temporal retries the stalled worker's attempts elsewhere. */
const STALL_MS = 20_000;
/** The endpoint answers each request this long after reading it: the stalled worker's POSTs are still open when their retries come. */
const ANSWER_AFTER_MS = 25_000;
const EVENTS = 20;

const scenario = useProductionScenario('prod-worker-stall');

it(
  'production topology: a worker replica stalled past its heartbeat timeout while its POSTs are open; ' +
    'their retries on the other replica wait until those requests can no longer be out, so no delivery is ever sent twice at once',
  async () => {
    const { cluster, receiver, webhook } = scenario;
    receiver.latencyMs = ANSWER_AFTER_MS;
    const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: EVENTS });
    await publisher.whenAccepted(EVENTS);
    await waitFor('sends under way', async () => ((await statusCounts(cluster, webhook.webhookId)).processing ?? 0) >= 4, { timeoutMs: 60_000, intervalMs: 50 });

    const status = cluster.topology.status;
    const connection = await connectToTemporal(status.temporal, parseConfig(status.temporalEnv).temporal, (options) => Connection.connect(options));
    try {
      const client = new Client({ connection, namespace: parseConfig(status.temporalEnv).temporal.namespace });
      const stalledPid = cluster.topology.pid('worker', 1);
      // The attempts the replica about to stall has out (its identity is the SDK's pid@host).
      const outOnStalled = await waitFor('the replica to stall to have a POST out', async () => {
        const processing = await cluster.db
          .select({ id: deliveries.id })
          .from(deliveries)
          .where(and(eq(deliveries.webhookId, webhook.webhookId), eq(deliveries.status, 'processing')));
        const described = await Promise.all(processing.map((delivery) => client.workflow.getHandle(delivery.id).describe()));
        const onStalled = described.filter((workflow) => workflow.raw.pendingActivities?.some((activity) => activity.lastWorkerIdentity?.startsWith(`${stalledPid}@`)));
        return onStalled.length > 0 && onStalled.length;
      }, { timeoutMs: 30_000, intervalMs: 200 });

      const stalledAt = Date.now();
      process.kill(stalledPid, 'SIGSTOP');
      try {
        await new Promise((resolve) => setTimeout(resolve, STALL_MS));
      } finally {
        process.kill(stalledPid, 'SIGCONT');
      }

      const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
      const figures = await finish(
        'production: one of two worker replicas stalled (SIGSTOP) 20 s with POSTs open',
        scenario,
        [publisher],
        { startedAt: publisher.startedAt, damagedAt: stalledAt, repairedAt: stalledAt + STALL_MS, settledAt: settled.at },
        { attemptsOutOnTheStalledReplica: outOnStalled, sentTwiceAtOnce: receiver.sentTwiceAtOnce.size },
      );
      expect(figures.deliveries).toBe(EVENTS);
      expect([...receiver.sentTwiceAtOnce]).toEqual([]);
    } finally {
      await connection.close();
    }
  },
  600_000,
);
