import { expect, it } from 'vitest';
import { EVENTS, finish, midRun, RATE, useProductionScenario } from './scenario.ts';
import { Publisher, waitUntilSettled } from './workload.ts';

const scenario = useProductionScenario('prod-worker-kill');

it('production topology: delivers every event when one of the two worker replicas is killed with SIGKILL mid-run; the other carries on', async () => {
  const { cluster, receiver, webhook } = scenario;
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await midRun(scenario, publisher);
  const damagedAt = Date.now();
  cluster.damaged('worker', 1);
  await cluster.topology.kill('worker', 1);

  // Not restarted: worker 0 takes over its workflows and, once their start-to-close timeout
  // runs out, the attempts the dead replica had running.
  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  const status = await cluster.topology.refresh();
  /** The longest a delivery waited after the kill: from the kill, or its 202 if later, to its first arrival. */
  const longestWaitAfter = (killedAt: number) =>
    Math.max(
      0,
      ...publisher.records.flatMap((record) =>
        (record.accepted?.deliveryIds ?? []).map((id) => {
          const firstAt = receiver.seen.get(id)?.firstAt ?? Number.POSITIVE_INFINITY;
          return firstAt < killedAt ? 0 : firstAt - Math.max(killedAt, record.accepted!.at);
        }),
      ),
    );
  const figures = await finish(
    'production: one of two worker replicas SIGKILL',
    scenario,
    [publisher],
    { startedAt: publisher.startedAt, damagedAt, repairedAt: damagedAt, settledAt: settled.at },
    { deliveredAfterTheKill: receiver.receipts.filter((t) => t > damagedAt).length, longestWaitAfterTheKillMs: longestWaitAfter(damagedAt) },
  );
  expect(status.stopped).toEqual([{ role: 'worker', index: 1 }]);
  expect(figures.deliveries).toBe(EVENTS);
});
