import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { queryRows } from '../../src/db/client.ts';
import { createMetrics, renderMetrics } from '../../src/metrics.ts';
import { waitFor } from '../support/wait.ts';
import { BASE, publishFor, waitForDelivery } from '../delivery/support.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { makeSelfSignedCertificate, peakConcurrency, startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';

/*
 * Send capacity at every level, on real workflows: a project, and a destination host, hold at
 * most their places whatever the number of their webhooks; their sends hold no worker slot while
 * they wait on the network, so another customer's deliveries go out beside them.
 */

/** The worker's activity slots: fewer than the sends left hanging below. */
const ACTIVITY_SLOTS = 2;
const limits = { webhookMaxInFlight: 2, projectMaxInFlight: 3, destinationMaxInFlight: 5 };

const certificate = makeSelfSignedCertificate();
let h: Harness;
/** Every request to it hangs until answered by the test: the customer endpoints that hang. */
let hanging: HttpsReceiver;
/** Another destination host (127.0.0.2), answering at once: the healthy customer's. */
let healthy: HttpsReceiver;

beforeAll(async () => {
  hanging = await startHttpsReceiver({ certificate });
  hanging.behave(() => 'hang');
  healthy = await startHttpsReceiver({ host: '127.0.0.2', certificate });
  h = await startHarness({
    worker: true,
    activitySlots: ACTIVITY_SLOTS,
    delivery: { caFile: certificate.certFile, timeoutMs: 60_000 },
    flow: limits,
  });
});
afterAll(async () => {
  await h?.stop();
  await hanging?.close();
  await healthy?.close();
  certificate.cleanup();
});

/** A project (an API key of its own) with a webhook at each of `urls`. */
async function projectWithWebhooks(urls: string[]) {
  const key = await h.createKey();
  const webhookIds: string[] = [];
  for (const url of urls) {
    const response = await h.request('POST', `${BASE}/webhooks`, { token: key.token, body: { api_key_id: key.id, url, events: ['docauth.completed'] } });
    expect(response.status).toBe(201);
    webhookIds.push(response.body.data.id);
  }
  return { key, webhookIds };
}

/** Every delivery of the projects' webhooks, with its webhook. */
async function deliveriesOf(projects: { webhookIds: string[] }[]) {
  const webhookIds = projects.flatMap((project) => project.webhookIds);
  return queryRows<{ id: string; webhook_id: string }>(h.db, sql`select id, webhook_id from deliveries where webhook_id in ${webhookIds}`);
}

/** Deliveries of the given webhooks by status. */
async function statusesOf(webhookIds: string[]): Promise<Record<string, number>> {
  const rows = await queryRows<{ status: string; count: number }>(
    h.db,
    sql`select status, count(*)::int as count from deliveries where webhook_id in ${webhookIds} group by status`,
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.count]));
}

/** Deliveries of the given webhooks waiting for a place, by the level they wait at. */
async function waitingOf(webhookIds: string[]) {
  const rows = await queryRows<{ blocked: string; count: number }>(
    h.db,
    sql`select blocked, count(*)::int as count from send_waiters where webhook_id in ${webhookIds} group by blocked`,
  );
  return Object.fromEntries(rows.map((row) => [row.blocked, row.count]));
}

const openAt = (receiver: HttpsReceiver, prefix: string) =>
  receiver.requests.filter((request) => request.path.startsWith(prefix) && request.endedAt === undefined).length;

/** Publishes `count` events of the healthy customer's and checks each is delivered, while `stillHanging` holds. */
async function healthyDeliveredBeside(stillHanging: () => boolean, count = 5) {
  const customer = await projectWithWebhooks([`${healthy.url}/ok`]);
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push(...(await publishFor(h, customer.key.projectId)).delivery_ids);
  for (const id of ids) {
    const delivered = await waitForDelivery(h, customer.key.token, customer.webhookIds[0]!, id, (d) => d.status === 'delivered', 30_000);
    expect(delivered.attempt_count).toBe(1);
  }
  expect(stillHanging()).toBe(true);
}

describe('send capacity', () => {
  it("holds no worker slot while a send waits for its endpoint's answer: more sends hang than the worker has slots, and another customer is delivered", async () => {
    const noisy = [await projectWithWebhooks([`${hanging.url}/slots/a`]), await projectWithWebhooks([`${hanging.url}/slots/b`])];
    for (const project of noisy) for (let i = 0; i < 2; i += 1) await publishFor(h, project.key.projectId);
    const open = limits.webhookMaxInFlight * noisy.length;
    expect(open).toBeGreaterThan(ACTIVITY_SLOTS);
    await waitFor(`${open} sends to hang`, () => openAt(hanging, '/hooks/slots/') === open);
    await healthyDeliveredBeside(() => openAt(hanging, '/hooks/slots/') === open);
    hanging.answerHanging(200);
    await waitFor('the hanging ones to be delivered', async () => (await statusesOf(noisy.flatMap((project) => project.webhookIds))).delivered === open);
  }, 120_000);

  it("holds one project's many webhooks on a hanging host to PROJECT_MAX_IN_FLIGHT sends, which hold no worker slot, while another customer is delivered", async () => {
    const noisy = await projectWithWebhooks(['a', 'b', 'c'].map((path) => `${hanging.url}/project/${path}`));
    for (let i = 0; i < 4; i += 1) await publishFor(h, noisy.key.projectId);
    const deliveries = await deliveriesOf([noisy]);
    expect(deliveries).toHaveLength(12);
    // Three sends are out, the other nine wait (in their workflows, using no attempt).
    await waitFor('the project to have its 3 sends out and its other deliveries pending', async () =>
      openAt(hanging, '/hooks/project/') === limits.projectMaxInFlight && (await statusesOf(noisy.webhookIds)).pending === 9,
    );
    await waitFor('the other nine to wait in line', async () => {
      const waiting = await waitingOf(noisy.webhookIds);
      return (waiting.project ?? 0) + (waiting.webhook ?? 0) === 9;
    });
    expect((await waitingOf(noisy.webhookIds)).project).toBeGreaterThan(0);

    // More sends hang than the worker has slots, and another customer's deliveries still go out.
    expect(limits.projectMaxInFlight).toBeGreaterThan(ACTIVITY_SLOTS);
    await healthyDeliveredBeside(() => openAt(hanging, '/hooks/project/') === limits.projectMaxInFlight);
    expect(hanging.requests.filter((request) => request.path.startsWith('/hooks/project/'))).toHaveLength(limits.projectMaxInFlight);

    const scrape = await renderMetrics(createMetrics({ database: { db: h.db, limits: { ...parseConfig({}).flow, ...limits } } }));
    expect(scrape).toMatch(/webhook_send_scopes_at_capacity\{level="project"\} 1/);
    expect(scrape).toMatch(/webhook_sends_waiting\{level="project"\} [1-9]/);
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_send_waits_total\{reason="project_busy"\} [1-9]/);
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_worker_sends_in_flight [1-9]/);

    // The host recovers: every delivery goes out, never more than the project's places at once, each in one attempt.
    hanging.behave(() => ({ status: 200 }));
    hanging.answerHanging(200);
    await waitFor('every delivery of the project', async () => {
      const rows = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from deliveries where webhook_id in ${noisy.webhookIds} and status = 'delivered' and attempt_count = 1`);
      return rows[0]!.n === 12;
    });
    expect(peakConcurrency(hanging.requests.filter((request) => request.path.startsWith('/hooks/project/')))).toBeLessThanOrEqual(limits.projectMaxInFlight);
    hanging.behave(() => 'hang');
  }, 120_000);

  it('holds the webhooks of many projects on one hanging host to DESTINATION_MAX_IN_FLIGHT sends, shared among them, while another host is delivered', async () => {
    const projects = [];
    for (let i = 0; i < 4; i += 1) projects.push(await projectWithWebhooks([`${hanging.url}/destination/${i}`]));
    for (const project of projects) for (let i = 0; i < 3; i += 1) await publishFor(h, project.key.projectId);
    const webhookIds = projects.flatMap((project) => project.webhookIds);
    await waitFor('the destination to have its 5 sends out and the other deliveries pending', async () =>
      openAt(hanging, '/hooks/destination/') === limits.destinationMaxInFlight &&
      (await statusesOf(webhookIds)).pending === 12 - limits.destinationMaxInFlight,
    );
    await waitFor('the others to wait in line', async () => {
      const waiting = await waitingOf(webhookIds);
      return (waiting.destination ?? 0) + (waiting.webhook ?? 0) === 12 - limits.destinationMaxInFlight;
    });
    expect((await waitingOf(webhookIds)).destination).toBeGreaterThan(0);
    await healthyDeliveredBeside(() => openAt(hanging, '/hooks/destination/') === limits.destinationMaxInFlight);
    expect(await h.metrics.registry.metrics()).toMatch(/webhook_send_waits_total\{reason="destination_busy"\} [1-9]/);

    hanging.behave(() => ({ status: 200 }));
    hanging.answerHanging(200);
    await waitFor('every delivery to the destination', async () => {
      const rows = await queryRows<{ n: number }>(h.db, sql`select count(*)::int as n from deliveries where webhook_id in ${webhookIds} and status = 'delivered' and attempt_count = 1`);
      return rows[0]!.n === 12;
    });
    const toDestination = hanging.requests.filter((request) => request.path.startsWith('/hooks/destination/'));
    expect(peakConcurrency(toDestination)).toBeLessThanOrEqual(limits.destinationMaxInFlight);
    // Every project had sends out while the host hung: its places were shared, not taken by the first project.
    const firstOut = toDestination.slice(0, limits.destinationMaxInFlight).map((request) => request.path.split('/')[3]);
    expect(new Set(firstOut).size).toBeGreaterThan(1);
  }, 120_000);
});
