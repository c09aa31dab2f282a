import { expect, it } from 'vitest';
import { EVENTS, finish, midRun, RATE, useProductionScenario } from './scenario.ts';
import { call, isV2ErrorBody } from '../support/http.ts';
import { Publisher, waitUntilSettled } from './workload.ts';
import { sleep } from '../support/wait.ts';

const scenario = useProductionScenario('prod-postgres-stop');

const DOWN_MS = 10_000;

it('production topology: recovers by itself from PostgreSQL stopped for 10 s under the Temporal server and the service', async () => {
  const { cluster, webhook } = scenario;
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await midRun(scenario, publisher);
  const damagedAt = Date.now();
  cluster.damaged('postgres');
  await cluster.topology.stopPostgres(); // pg_ctl stop -m fast: every session of Temporal and of the service ends
  await sleep(DOWN_MS / 2);
  const readiness = await Promise.all(cluster.apiUrls.map((url) => call(`${url}/readyz`, { timeoutMs: 5_000 })));
  await sleep(DOWN_MS / 2);
  // Nothing but PostgreSQL is down: the Temporal server and the replicas waited for it.
  const stoppedWhileDown = (await cluster.topology.refresh()).stopped;
  await cluster.topology.startPostgres();
  const repairedAt = Date.now();

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });
  const figures = await finish('production: PostgreSQL stopped 10 s', scenario, [publisher], {
    startedAt: publisher.startedAt,
    damagedAt,
    repairedAt,
    settledAt: settled.at,
  }, {
    readyzWhileDown: readiness.map((answer) => (typeof answer === 'string' ? answer : `${answer.status} ${answer.body?.error?.code}`)),
    publishTriesAnswered5xx: publisher.records.reduce((k, r) => k + r.outcomes.filter((o) => typeof o === 'number' && o >= 500).length, 0),
  });
  expect(stoppedWhileDown).toEqual([{ role: 'postgres', index: 0 }]);
  for (const answer of readiness) {
    expect(typeof answer).not.toBe('string');
    if (typeof answer !== 'string') {
      expect(answer.status).toBe(503);
      expect(isV2ErrorBody(answer.body)).toBe(true);
    }
  }
  expect(figures.deliveries).toBe(EVENTS);
});
