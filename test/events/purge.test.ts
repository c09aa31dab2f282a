import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eraseEventPayloads, recordEvent } from '../../src/db/queries/events.ts';
import { deliveries, events } from '../../src/db/schema.ts';
import { openPayload } from '../../src/db/sealing.ts';
import { newId } from '../../src/ids.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { NON_RETRYABLE, NON_RETRYABLE_REASONS } from '../../workflows/failure-types.ts';
import { BASE, createWebhookFor, waitForDelivery } from '../delivery/support.ts';
import { runCli } from '../support/cli.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { docauthData } from '../support/event-data.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { seedProject } from '../support/history.ts';

const ERASED_REASON = NON_RETRYABLE_REASONS[NON_RETRYABLE.eventErased];

describe('npm run cli -- events purge', () => {
  const key = generateEncryptionKey();
  const box = new SecretBox(key);
  let database: SharedTestDatabase;
  let env: Record<string, string>;
  let projectA: string;
  let projectB: string;

  const publish = async (projectId: string, producerEventId: string, requestId: string) =>
    recordEvent(database.db, box, {
      projectId,
      producerEventId,
      event: 'docauth.completed',
      occurredAt: new Date(),
      payload: docauthData({ request_id: requestId }),
    });
  const eventRow = async (id: string) => (await database.db.select().from(events).where(eq(events.id, id)))[0]!;
  /** An event as a release before sealing stored it: its data in clear, no lookup hash. */
  const storeInClear = async (projectId: string, requestId: string) => {
    const id = newId('event');
    await database.db.insert(events).values({
      id,
      projectId,
      producerEventId: 'doc-legacy',
      event: 'docauth.completed',
      occurredAt: new Date(),
      payloadLegacy: docauthData({ request_id: requestId }),
      createdAt: new Date(),
    });
    return id;
  };
  const deliveryRow = async (id: string) => (await database.db.select().from(deliveries).where(eq(deliveries.id, id)))[0]!;

  beforeAll(async () => {
    database = await openSharedTestDatabase();
    env = { ...database.cliEnv, SECRET_ENCRYPTION_KEY: key };
    projectA = (await seedProject(database.db, box, 1)).projectId;
    projectB = (await seedProject(database.db, box, 1)).projectId;
  }, 120_000);
  afterAll(async () => {
    await database?.close();
  });

  it('--id erases one event of the project at once; its deliveries keep their metadata', async () => {
    const target = await publish(projectA, 'doc-1', 'req-one');
    const other = await publish(projectA, 'doc-2', 'req-two');
    const deliveryId = target.deliveries[0]!.deliveryId;
    const deliveryBefore = await deliveryRow(deliveryId);

    const result = await runCli(['events', 'purge', '--project', projectA, '--id', 'doc-1', '--json'], env);

    expect(result.stderr).toBe('');
    const { erased } = JSON.parse(result.stdout);
    expect(erased).toEqual([{ event_id: target.event.id, id: 'doc-1', erased_at: expect.any(String), delivery_ids: [deliveryId] }]);
    const row = await eventRow(target.event.id);
    expect(row).toMatchObject({ payloadSealed: null, payloadLegacy: null, requestIdHash: null, producerEventId: 'doc-1' });
    expect(row.erasedAt?.toISOString()).toBe(erased[0].erased_at);
    expect(openPayload(box, row)).toBeUndefined();
    expect(await deliveryRow(deliveryId)).toEqual(deliveryBefore);
    expect(openPayload(box, await eventRow(other.event.id))).toMatchObject({ request_id: 'req-two' });
  });

  it('--request-id erases every event of that project carrying it, and none of another project', async () => {
    const first = await publish(projectA, 'doc-3', 'req-shared');
    const second = await publish(projectA, 'doc-4', 'req-shared');
    const elsewhere = await publish(projectB, 'doc-3', 'req-shared');

    const result = await runCli(['events', 'purge', '--project', projectA, '--request-id', 'req-shared'], env);

    expect(result.code).toBe(0);
    expect(result.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^Erased the data of event ${first.event.id} \\(id doc-3\\) at .*; its 1 delivery keeps their metadata\\.$`)),
      expect.stringMatching(new RegExp(`^Erased the data of event ${second.event.id} \\(id doc-4\\) at `)),
    ]);
    expect((await eventRow(first.event.id)).payloadSealed).toBeNull();
    expect((await eventRow(second.event.id)).payloadSealed).toBeNull();
    expect(openPayload(box, await eventRow(elsewhere.event.id))).toMatchObject({ request_id: 'req-shared' });
  });

  it('--request-id also erases an event an earlier release stored in clear, before any `secrets reseal`', async () => {
    const legacyId = await storeInClear(projectA, 'req-legacy');
    const elsewhere = await storeInClear(projectB, 'req-legacy');

    const result = await runCli(['events', 'purge', '--project', projectA, '--request-id', 'req-legacy', '--json'], env);

    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout).erased).toEqual([expect.objectContaining({ event_id: legacyId, id: 'doc-legacy' })]);
    expect(await eventRow(legacyId)).toMatchObject({ payloadLegacy: null, payloadSealed: null, erasedAt: expect.any(Date) });
    expect((await eventRow(elsewhere)).payloadLegacy).toMatchObject({ request_id: 'req-legacy' });
  });

  it('a repeat keeps the first erasure time; no match erases nothing; a wrong call gets the usage', async () => {
    const target = await publish(projectA, 'doc-5', 'req-five');
    await runCli(['events', 'purge', '--project', projectA, '--id', 'doc-5'], env);
    const firstTime = (await eventRow(target.event.id)).erasedAt;
    const again = JSON.parse((await runCli(['events', 'purge', '--project', projectA, '--id', 'doc-5', '--json'], env)).stdout);
    expect(new Date(again.erased[0].erased_at)).toEqual(firstTime);

    const none = await runCli(['events', 'purge', '--project', projectB, '--id', 'doc-5'], env);
    expect(none).toMatchObject({ code: 0, stdout: `No event of project ${projectB} matches; nothing erased.\n` });
    const usage = await runCli(['events', 'purge', '--project', projectA, '--id', 'doc-5', '--request-id', 'req-five'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^usage: events purge --project <id> \(--id <producer event id> \| --request-id <data.request_id>\)/);
  });
});

describe('a delivery whose event was erased', () => {
  const started = harnessWithReceiver();

  it('sends nothing more: it ends dead_letter with a clear last_error, also after a manual retry', async () => {
    const { harness: h, receiver } = started;
    receiver.behave(() => ({ status: 500 }));
    const { key, webhookId } = await createWebhookFor(h, receiver.url);
    const published = await h.publish({ id: 'erase-me', project_id: key.projectId, event: 'docauth.completed', data: docauthData() });
    const deliveryId = published.body.data.delivery_ids[0] as string;
    const sent = () => receiver.requests.filter((r) => r.headers['x-service-delivery-id'] === deliveryId).length;
    // Erased in the 1 s backoff after the first attempt (answered 500), before the second.
    await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.attempt_count === 1 && d.status === 'failed');
    await eraseEventPayloads(h.db, h.secretBox, key.projectId, { producerEventId: 'erase-me' });

    const dead = await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'dead_letter');
    expect(dead).toMatchObject({ attempt_count: 1, last_error: ERASED_REASON, event: 'docauth.completed' });
    expect(sent()).toBe(1);

    receiver.behave(() => ({ status: 200 }));
    const retry = await h.request('POST', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/retry`, { token: key.token });
    expect(retry.status).toBe(202);
    await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'pending' || d.status === 'dead_letter');
    const again = await waitForDelivery(h, key.token, webhookId, deliveryId, (d) => d.status === 'dead_letter');
    expect(again.last_error).toBe(ERASED_REASON);
    expect(sent()).toBe(1);
    const attempts = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/attempts`, { token: key.token });
    expect(attempts.body.data).toHaveLength(1);
    expect(attempts.body.data[0]).toMatchObject({ status_code: 500 });
  }, 60_000);
});
