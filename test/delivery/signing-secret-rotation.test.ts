import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook } from '../../src/receiver/index.ts';
import { computeSignature } from '../../src/signing.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.ts';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from './support.ts';

let h: Harness;
let receiver: HttpsReceiver;

beforeAll(async () => {
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, delivery: { caFile: receiver.certFile, allowPrivateTargets: true } });
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});
beforeEach(() => {
  receiver.requests.length = 0;
  receiver.behave(() => ({ status: 200 }));
});

/** Whether the request verifies with `secret`: the service's scheme, or with `standard` the Standard Webhooks library. */
function verifies(request: ReceivedRequest, secret: string, standard = false): boolean {
  try {
    if (standard) new Webhook(secret).verify(request.rawBody.toString('utf8'), request.headers as Record<string, string>);
    else verifyWebhook({ rawBody: request.rawBody, headers: request.headers, secret });
    return true;
  } catch {
    return false;
  }
}

const rotate = (token: string, webhookId: string, body?: unknown) =>
  h.request('POST', `${BASE}/webhooks/${webhookId}/rotate-secret`, { token, ...(body !== undefined && { body }) });

async function attemptsOf(token: string, webhookId: string, deliveryId: string): Promise<Array<Record<string, any>>> {
  const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/attempts`, { token });
  return response.body.data;
}

describe('rotating a signing secret with a grace period', () => {
  it('delivers pending retries with no failed attempt, whether the receiver verifies with the old secret or the new one', async () => {
    // Three receivers: one still holding the old secret (its deploy is not done), one with the new
    // one already, one verifying with the Standard Webhooks library and the old secret.
    const oldOnly = await createWebhookFor(h, `${receiver.url}/old-only`);
    const newOnly = await createWebhookFor(h, `${receiver.url}/new-only`);
    const standard = await createWebhookFor(h, `${receiver.url}/standard`, { standard_webhooks: true });
    const newSecrets = new Map<string, string>();
    let rotated = false;
    receiver.behave((request) => {
      if (!rotated) return { status: 503 };
      if (request.path.endsWith('/old-only')) return { status: verifies(request, oldOnly.secret) ? 200 : 401 };
      if (request.path.endsWith('/new-only')) return { status: verifies(request, newSecrets.get(newOnly.webhookId)!) ? 200 : 401 };
      return { status: verifies(request, standard.secret, true) ? 200 : 401 };
    });
    const webhooks = [oldOnly, newOnly, standard];
    const published = await Promise.all(
      webhooks.flatMap((webhook) => [1, 2, 3].map(async () => ({ ...webhook, deliveryId: (await publishFor(h, webhook.key.projectId)).delivery_ids[0]! }))),
    );
    // Every delivery is retrying: it has failed once and waits for its next attempt.
    await Promise.all(published.map((d) => waitForDelivery(h, d.key.token, d.webhookId, d.deliveryId, (delivery) => delivery.status === 'failed', 30_000)));

    for (const webhook of webhooks) {
      const response = await rotate(webhook.key.token, webhook.webhookId, { grace_period: 3600 });
      expect(response.status).toBe(200);
      newSecrets.set(webhook.webhookId, response.body.data.secret);
    }
    rotated = true;
    const rotatedAt = Date.now();

    await Promise.all(published.map((d) => waitForDelivery(h, d.key.token, d.webhookId, d.deliveryId, (delivery) => delivery.status === 'delivered', 60_000)));
    let checked = 0;
    for (const d of published) {
      const attempts = await attemptsOf(d.key.token, d.webhookId, d.deliveryId);
      const afterRotation = attempts.filter((attempt) => Date.parse(attempt.started_at) > rotatedAt);
      expect(afterRotation.map((attempt) => attempt.outcome)).toEqual(afterRotation.map(() => 'succeeded'));
      // An attempt started after the rotation read both secrets when it started: its request
      // (the delivery's last) carries both signatures, the new one first. (A send in flight at
      // the rotation may have delivered it before, signed with the old secret alone.)
      if (afterRotation.length === 0) continue;
      const request = receiver.requests.filter((r) => r.headers['x-service-delivery-id'] === d.deliveryId).at(-1)!;
      const timestamp = String(request.headers['x-service-timestamp']);
      expect(String(request.headers['x-service-signature']).split(' ')).toEqual(
        [newSecrets.get(d.webhookId)!, d.secret].map((secret) => computeSignature(secret, timestamp, request.rawBody)),
      );
      checked += 1;
    }
    expect(checked).toBeGreaterThan(0);
  });

  it('signs with the new secret alone once the grace period has ended', async () => {
    const { key, webhookId, secret: oldSecret } = await createWebhookFor(h, receiver.url, { standard_webhooks: true });
    const rotation = await rotate(key.token, webhookId, { grace_period: 1 });
    const newSecret = rotation.body.data.secret as string;
    await new Promise((resolve) => setTimeout(resolve, Date.parse(rotation.body.data.previous_secret_expires_at) - Date.now() + 50));

    const test = await h.request('POST', `${BASE}/webhooks/${webhookId}/test-events`, { token: key.token });
    expect(test.status).toBe(202);
    const deliveryId = test.body.data.delivery_id as string;
    await waitForDelivery(h, key.token, webhookId, deliveryId, (delivery) => delivery.status === 'delivered');
    const [request] = receiver.requests.filter((r) => r.headers['x-service-delivery-id'] === deliveryId);
    expect(request!.headers['x-service-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(verifies(request!, newSecret)).toBe(true);
    expect(verifies(request!, oldSecret)).toBe(false);
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifies(request!, newSecret, true)).toBe(true);
    expect(verifies(request!, oldSecret, true)).toBe(false);
    expect(request!.headers['webhook-id']).toBe(deliveryId);
    const shown = await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token });
    expect(shown.body.data).not.toHaveProperty('previous_secret_expires_at');
  });

  it('under load: 10 events/s, rotated halfway, a receiver holding only the old secret sees no failed attempt', async () => {
    const { key, webhookId, secret: oldSecret } = await createWebhookFor(h, receiver.url, { standard_webhooks: true });
    receiver.behave((request) => ({ status: verifies(request, oldSecret) && verifies(request, oldSecret, true) ? 200 : 401 }));
    const deliveryIds: string[] = [];
    let rotatedAt = 0;
    const started = Date.now();
    for (let index = 0; index < 100; index++) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + index * 100 - Date.now())));
      if (index === 50) {
        expect((await rotate(key.token, webhookId, { grace_period: 86400 })).status).toBe(200);
        rotatedAt = Date.now();
      }
      deliveryIds.push((await publishFor(h, key.projectId)).delivery_ids[0]!);
    }
    const delivered = await Promise.all(deliveryIds.map((id) => waitForDelivery(h, key.token, webhookId, id, (d) => d.status === 'delivered', 60_000)));
    expect(delivered.map((d) => d.attempt_count)).toEqual(deliveryIds.map(() => 1));
    const twoSignatures = receiver.requests.filter((r) => String(r.headers['x-service-signature']).includes(' ')).length;
    expect(twoSignatures).toBeGreaterThan(0);
    const webhook = await h.request('GET', `${BASE}/webhooks/${webhookId}`, { token: key.token });
    expect(webhook.body.data).toMatchObject({ success_count: 100, failure_count: 0 });
    console.info(
      `rotation under load: ${deliveryIds.length} events in ${((Date.now() - started) / 1000).toFixed(1)} s, rotated at ${((rotatedAt - started) / 1000).toFixed(1)} s; ` +
        `${receiver.requests.length} requests, ${twoSignatures} with two signatures, 0 failed attempts`,
    );
  });
});
