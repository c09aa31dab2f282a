import { and, eq } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { deliveries } from '../../src/db/schema.ts';
import { sleep, waitFor } from '../support/wait.ts';
import { EVENTS, finish, midRun, RATE, useScenario } from './scenario.ts';
import { call, isV2ErrorBody, type HttpAnswer, type NoAnswer } from '../support/http.ts';
import { docauthData, Publisher, waitUntilSettled } from './workload.ts';

const scenario = useScenario('postgres-stop');

/**
 * Twice a round's schedule (1 + 2 + 4 + 8 s between its 5 attempts): sends that cannot reach the
 * database must wait for it, not use up attempts.
 */
const DOWN_MS = 30_000;
/** A probe that gets no answer within this is a hang. */
const PROBE_TIMEOUT_MS = 5_000;

interface Probe {
  what: string;
  sentAt: number;
  answeredAt?: number;
  answer?: HttpAnswer | NoAnswer;
}

it('recovers by itself from Postgres stopped for 30 s mid-run, twice a round of attempts, with no delivery dead-lettered and none sent twice; the API answers v2 errors meanwhile', async () => {
  const { cluster, webhook } = scenario;
  // The publish probes go to a project without webhooks, so they add no deliveries.
  const probeProject = await cluster.createKey();
  const publisher = new Publisher({ cluster, webhook, count: EVENTS, ratePerSecond: RATE });
  await midRun(scenario, publisher);

  const damagedAt = Date.now();
  await cluster.postgres.stop(); // pg_ctl stop -m fast: sessions are terminated
  const downAt = Date.now();
  // While it is down, ask the API every 500 ms: readiness, a v2 read, and a publish.
  const probes: Probe[] = [];
  let n = 0;
  while (Date.now() - downAt < DOWN_MS) {
    n += 1;
    const targets: [string, Parameters<typeof call>[1]][] = [
      ['/readyz', {}],
      [`/api-gateway/v2/webhooks/${webhook.webhookId}/deliveries?limit=5`, { token: webhook.token }],
      [
        '/internal/v1/events',
        {
          token: probeProject.producerKey,
          body: { id: `probe-${n}`, project_id: probeProject.projectId, event: 'docauth.completed', data: docauthData(`probe-${n}`) },
        },
      ],
    ];
    for (const [path, init] of targets) {
      const probe: Probe = { what: path.split('?')[0]!, sentAt: Date.now() };
      probes.push(probe);
      void call(`${cluster.apiUrl}${path}`, { ...init, timeoutMs: PROBE_TIMEOUT_MS }).then((answer) => {
        probe.answer = answer;
        probe.answeredAt = Date.now();
      });
    }
    await sleep(500);
  }
  const restartingAt = Date.now();
  await cluster.postgres.start();
  const repairedAt = Date.now();
  await waitFor('every probe to settle', () => probes.every((probe) => probe.answer !== undefined), { timeoutMs: PROBE_TIMEOUT_MS + 5_000 });
  const readyAgainMs = (await waitFor('/readyz to answer 200 again', async () => {
    const answer = await call(`${cluster.apiUrl}/readyz`, { timeoutMs: 5_000 });
    return typeof answer !== 'string' && answer.status === 200 ? Date.now() : undefined;
  }, { timeoutMs: 60_000 })) - repairedAt;

  const settled = await waitUntilSettled(cluster, webhook.webhookId, publisher, { timeoutMs: 240_000 });

  // No hang, no crash: every probe got an HTTP answer; those answered while Postgres was
  // down are 5xx with the v2 error body (503 from /readyz, 500 elsewhere).
  const unanswered = probes.filter((probe) => typeof probe.answer === 'string');
  const duringOutage = probes.filter((probe) => probe.answeredAt! < restartingAt && typeof probe.answer !== 'string');
  const badDuringOutage = duringOutage.filter((probe) => {
    const answer = probe.answer as HttpAnswer;
    return answer.status < 500 || !isV2ErrorBody(answer.body);
  });
  const slowest = Math.max(...probes.map((probe) => (typeof probe.answer === 'string' ? Infinity : (probe.answer as HttpAnswer).ms)));
  const codes = [...new Set(duringOutage.map((p) => `${p.what} ${(p.answer as HttpAnswer).status} ${(p.answer as HttpAnswer).body?.error?.code}`))];
  // Sends that found the database unreachable before their request went out, and waited for it.
  const metrics = await (await fetch(cluster.workerMetricsUrl)).text();
  const databaseWaits = metrics
    .split('\n')
    .filter((line) => line.startsWith('webhook_send_waits_total{reason="database_unreachable"}'))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  const deadLettered = await cluster.db.select({ id: deliveries.id }).from(deliveries).where(and(eq(deliveries.webhookId, webhook.webhookId), eq(deliveries.status, 'dead_letter')));

  const figures = await finish(
    'Postgres stopped 30 s',
    scenario,
    [publisher],
    { startedAt: publisher.startedAt, damagedAt, repairedAt, settledAt: settled.at },
    {
      probes: probes.length,
      probesAnsweredDuringOutage: duringOutage.length,
      probeAnswers: codes,
      slowestProbeMs: slowest,
      readyAgainMs,
      publishTriesAnswered5xx: publisher.records.reduce((k, r) => k + r.outcomes.filter((o) => typeof o === 'number' && o >= 500).length, 0),
      sendWaitsForTheDatabase: databaseWaits,
      deadLettered: deadLettered.length,
    },
  );
  expect(unanswered.map((probe) => `${probe.what}: ${String(probe.answer)}`)).toEqual([]);
  expect(duringOutage.length).toBeGreaterThan(0);
  expect(databaseWaits).toBeGreaterThan(0); // sends found it down, and waited
  expect(deadLettered).toEqual([]);
  // A 2xx that came back while it was down was recorded once it was back, not sent again.
  expect(figures.duplicates).toBe(0);
  expect(badDuringOutage.map((probe) => `${probe.what}: ${JSON.stringify(probe.answer)}`)).toEqual([]);
  expect(figures.deliveries).toBe(EVENTS);
});
