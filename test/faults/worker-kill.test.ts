import { expect, it } from 'vitest';
import { sleep } from '../support/wait.ts';
import { EVENTS, finish, midRun, RATE, useScenario } from './scenario.ts';
import { Publisher, waitUntilSettled } from './workload.ts';

const scenario = useScenario('worker-kill');

it('delivers every event when the worker is killed with SIGKILL mid-run and restarted', async () => {
  const { cluster, webhook } = scenario;
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await midRun(scenario, publisher);
  const damagedAt = Date.now();
  await cluster.worker.kill();
  await sleep(3_000);
  await cluster.worker.start();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  const figures = await finish('worker SIGKILL', scenario, [publisher], {
    startedAt: publisher.startedAt,
    damagedAt,
    repairedAt,
    settledAt: settled.at,
  });
  expect(figures.deliveries).toBe(EVENTS);
});
