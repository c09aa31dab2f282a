import { eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import { webhooks } from '../../src/db/schema.ts';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from '../delivery/support.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';

/** The status the receiver answers, per last path segment (one per webhook). */
const answers = new Map<string, number>();

const started = harnessWithReceiver({ autoDisable: { afterMs: 3_000, minDeadLetters: 2 } });
beforeAll(() => {
  started.receiver.behave((request) => ({ status: answers.get(request.path.split('/').pop()!) ?? 200 }));
});

const webhookOf = async (token: string, id: string) => (await started.harness.request('GET', `${BASE}/webhooks/${id}`, { token })).body.data;

/**
 * Waits until the delivery's markDeadLetter (a local activity, so a marker in the history) has
 * completed: the rule is applied after the dead letter is stored, so `dead_letter` shows in the
 * API a moment before the rule's outcome.
 */
async function deadLetterActivityDone(deliveryId: string): Promise<void> {
  const text = new TextDecoder();
  await waitFor(`markDeadLetter of ${deliveryId} to complete`, async () => {
    const events = (await started.harness.client.workflow.getHandle(deliveryId).fetchHistory()).events ?? [];
    return events.some((e) =>
      Object.values(e.markerRecordedEventAttributes?.details ?? {}).some((p) => p.payloads?.some((one) => text.decode(one.data ?? undefined).includes('"markDeadLetter"'))),
    );
  });
}

it('disables a webhook whose every attempt failed for the period with enough dead letters; a success in between resets the clock', async () => {
  const { harness: h, receiver } = started;
  answers.set('failing', 503).set('flaky', 503);
  const failing = await createWebhookFor(h, `${receiver.url}/failing`);
  const flaky = await createWebhookFor(h, `${receiver.url}/flaky`);

  // /failing: two dead letters in one run of failures. /flaky: one dead letter, a success, one more.
  const failingIds = [...(await publishFor(h, failing.key.projectId)).delivery_ids, ...(await publishFor(h, failing.key.projectId)).delivery_ids];
  const [flakyFirst] = (await publishFor(h, flaky.key.projectId)).delivery_ids;
  await waitForDelivery(h, flaky.key.token, flaky.webhookId, flakyFirst!, (d) => d.status === 'dead_letter', 60_000);
  answers.set('flaky', 200);
  const [flakyOk] = (await publishFor(h, flaky.key.projectId)).delivery_ids;
  await waitForDelivery(h, flaky.key.token, flaky.webhookId, flakyOk!, (d) => d.status === 'delivered');
  answers.set('flaky', 503);
  const [flakySecond] = (await publishFor(h, flaky.key.projectId)).delivery_ids;

  for (const id of failingIds) await waitForDelivery(h, failing.key.token, failing.webhookId, id, (d) => d.status === 'dead_letter', 60_000);
  for (const id of failingIds) await deadLetterActivityDone(id);
  const disabled = await webhookOf(failing.key.token, failing.webhookId);
  expect(disabled).toMatchObject({
    status: 'disabled',
    disabled_reason: expect.stringMatching(/^every attempt has failed since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(more than 3s\), 2 deliveries dead-lettered$/),
    disabled_at: expect.any(String),
  });
  expect(h.logs.some((line) => line.includes('webhook disabled by the service') && line.includes(failing.webhookId))).toBe(true);
  expect(await h.metrics.registry.metrics()).toContain('webhook_auto_disabled_total 1');

  await waitForDelivery(h, flaky.key.token, flaky.webhookId, flakySecond!, (d) => d.status === 'dead_letter', 60_000);
  await deadLetterActivityDone(flakySecond!);
  expect(await webhookOf(flaky.key.token, flaky.webhookId)).toMatchObject({ status: 'active' });
  expect((await webhookOf(flaky.key.token, flaky.webhookId)).disabled_reason).toBeUndefined();

  const reenabled = await h.request('PATCH', `${BASE}/webhooks/${failing.webhookId}`, { token: failing.key.token, body: { status: 'active' } });
  expect(reenabled.status).toBe(200);
  expect(reenabled.body.data.status).toBe('active');
  expect(reenabled.body.data).not.toHaveProperty('disabled_reason');
  expect(reenabled.body.data).not.toHaveProperty('disabled_at');
}, 120_000);

it("keeps the endpoint-health clock of an active webhook that is sent `status: active` again (the portal's form always sends it)", async () => {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, `${receiver.url}/steady`);
  const failingSince = new Date(Date.now() - 4 * 24 * 3_600_000);
  await h.db.update(webhooks).set({ failingSince }).where(eq(webhooks.id, webhookId));
  const patched = await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { status: 'active', headers: { 'X-Tag': '2' } } });
  expect(patched.status).toBe(200);
  const [kept] = await h.db.select().from(webhooks).where(eq(webhooks.id, webhookId));
  expect(kept!.failingSince).toEqual(failingSince);

  // Re-enabling a disabled one restarts it.
  await h.db.update(webhooks).set({ status: 'disabled', disabledReason: 'every attempt has failed', disabledAt: new Date() }).where(eq(webhooks.id, webhookId));
  expect((await h.request('PATCH', `${BASE}/webhooks/${webhookId}`, { token: key.token, body: { status: 'active' } })).status).toBe(200);
  const [reenabled] = await h.db.select().from(webhooks).where(eq(webhooks.id, webhookId));
  expect(reenabled).toMatchObject({ status: 'active', failingSince: null, disabledReason: null, disabledAt: null });
});
