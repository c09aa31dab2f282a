/**
 * An event stored but not dispatched says why, whatever its cause threw: the CLI and the API's
 * logs quote its reason, which must not assume the cause is an Error. The producers' door accepts
 * it all the same (a producer that sends no `id` and retried an error would publish it twice),
 * and the repair check starts its workflows.
 */
import { Client } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.ts';
import { parseConfig } from '../../src/config.ts';
import { events } from '../../src/db/schema.ts';
import { EventNotDispatchedError } from '../../src/events/publish.ts';
import { dispatchUndispatchedEvents } from '../../src/repair/outbox.ts';
import { DeliveryScheduler } from '../../src/temporal/scheduler.ts';
import { BASE, createWebhookFor } from '../delivery/support.ts';
import { docauthData, startHarness, type Harness } from '../support/harness.ts';

const event = { eventId: 'evt_1', deliveryIds: ['dlv_1', 'dlv_2'], created: true };

describe('EventNotDispatchedError', () => {
  it("quotes an Error cause's message and keeps the cause", () => {
    const cause = new Error('namespace not found: no-such-namespace');
    const error = new EventNotDispatchedError(event, cause);
    expect(error.reason).toBe('namespace not found: no-such-namespace');
    expect(error.message).toBe('event evt_1 is stored, but publishing it did not finish: namespace not found: no-such-namespace');
    expect(error.cause).toBe(cause);
    expect(error.event).toEqual(event);
  });

  it('quotes a cause that is not an Error as text', () => {
    expect(new EventNotDispatchedError(event, 'deadline exceeded').reason).toBe('deadline exceeded');
    expect(new EventNotDispatchedError(event, undefined).message).toBe('event evt_1 is stored, but publishing it did not finish: undefined');
  });
});

describe('an event whose workflows Temporal did not start', () => {
  let h: Harness;
  let app: ReturnType<typeof createApp>;
  beforeAll(async () => {
    h = await startHarness();
    // The same service with a Temporal client that every start fails for: its namespace does not exist.
    const unanswered = new DeliveryScheduler(new Client({ connection: h.client.connection, namespace: 'no-such-namespace' }), h.taskQueue, { eagerStart: false });
    const admission = { ...parseConfig({}).admission, publish: { rate: 100_000, burst: 1_000_000 } };
    app = createApp({ db: h.db, temporal: h.client, scheduler: unanswered, secretBox: h.secretBox, producerToken: h.producerToken, admission, logger: h.logger, metrics: h.metrics });
  }, 120_000);
  afterAll(async () => {
    await h?.stop();
  });

  const post = async (path: string, token: string, body?: unknown) => {
    const response = await app.request(path, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: response.status, body: (await response.json()) as any };
  };

  it('is accepted (202, saying the repair check starts it), not answered 500 for a producer to publish again; the repair check then starts it', async () => {
    const { key, webhookId } = await createWebhookFor(h, 'https://127.0.0.1:9/hook');
    const published = await post('/internal/v1/events', await h.producerKey(key.projectId), { project_id: key.projectId, event: 'docauth.completed', data: docauthData() });
    expect(published.status, JSON.stringify(published.body)).toBe(202);
    expect(published.body.message).toMatch(/^Event accepted for 1 delivery; Temporal did not answer, so the service's repair check starts its delivery shortly/);
    const [stored] = await h.db.select().from(events).where(eq(events.id, published.body.data.event_id));
    expect(stored).toMatchObject({ projectId: key.projectId, dispatchedAt: null });
    expect(h.logs.some((line) => line.includes('"startsLater"') && line.includes('no-such-namespace'))).toBe(true);

    const tested = await post(`${BASE}/webhooks/${webhookId}/test-events`, key.token);
    expect(tested.status, JSON.stringify(tested.body)).toBe(202);
    expect(tested.body.message).toContain("the service's repair check starts its delivery shortly");

    while ((await dispatchUndispatchedEvents(h, 0)).more);
    for (const deliveryId of [published.body.data.delivery_ids[0], tested.body.data.delivery_id]) {
      const workflow = h.client.workflow.getHandle(deliveryId);
      expect((await workflow.describe()).status.name).toBe('RUNNING');
      await workflow.terminate('the test is over');
    }
  });
});
