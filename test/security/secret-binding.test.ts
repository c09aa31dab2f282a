import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { resealWebhookSecrets } from '../../src/db/queries/webhooks.ts';
import { verifyWebhook } from '../../src/receiver/index.ts';
import { generateWebhookSecret } from '../../src/secrets/crypto.ts';
import { NON_RETRYABLE, NON_RETRYABLE_REASONS } from '../../workflows/failure-types.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { deadlineIn } from '../support/wait.ts';

/*
 * Finding: webhook secrets were sealed without the webhook's id as authenticated data, so
 * whoever could write to the database could copy one webhook's sealed secret onto another and
 * have that webhook's deliveries signed with it. Secrets are now bound to their row.
 */

const WEBHOOKS = '/api-gateway/v2/webhooks';

const started = harnessWithReceiver();
let key: { id: string; projectId: string; token: string };

beforeAll(async () => {
  key = await started.harness.createKey();
});

async function createWebhook(): Promise<{ id: string; secret: string }> {
  const created = await started.harness.request('POST', WEBHOOKS, {
    token: key.token,
    body: { api_key_id: key.id, url: started.receiver.url, events: ['docauth.completed'] },
  });
  expect(created.status).toBe(201);
  return { id: created.body.data.id, secret: created.body.data.secret };
}

const sealedSecretOf = async (id: string) =>
  (await queryRows<{ secret_sealed: string }>(started.harness.db, sql`select secret_sealed from webhooks where id = ${id}`))[0]!.secret_sealed;

async function sendTestEvent(webhookId: string): Promise<string> {
  const sent = await started.harness.request('POST', `${WEBHOOKS}/${webhookId}/test-events`, { token: key.token });
  expect(sent.status).toBe(202);
  return sent.body.data.delivery_id;
}

const requestsFor = (deliveryId: string) => started.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === deliveryId);

/**
 * Waits until the delivery reached the receiver, or its send failed inside the worker: a secret
 * that does not open dead-letters it at its first attempt, which sent nothing.
 */
async function firstOutcome(deliveryId: string): Promise<'sent' | 'send failed'> {
  const deadline = deadlineIn(45_000);
  while (!deadline.passed()) {
    if (requestsFor(deliveryId).length > 0) return 'sent';
    const [row] = await queryRows<{ status: string; last_error: string | null }>(started.harness.db, sql`select status, last_error from deliveries where id = ${deliveryId}`);
    if (row?.status === 'dead_letter') {
      expect(row.last_error).toBe(NON_RETRYABLE_REASONS[NON_RETRYABLE.sealedDataUnopenable]);
      return 'send failed';
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`delivery ${deliveryId} was neither sent nor failed`);
}

describe("a webhook's sealed secret", () => {
  it('copied onto another webhook does not open there: nothing is signed with it', async () => {
    const { harness: h } = started;
    const a = await createWebhook();
    const b = await createWebhook();
    await h.db.execute(sql`update webhooks set secret_sealed = ${await sealedSecretOf(a.id)} where id = ${b.id}`);

    const deliveryId = await sendTestEvent(b.id);
    expect(await firstOutcome(deliveryId)).toBe('send failed');
    expect(requestsFor(deliveryId)).toEqual([]);
  });

  it("headers copied onto another webhook do not open there either: its page fails rather than show them", async () => {
    const { harness: h, receiver } = started;
    const a = await h.request('POST', WEBHOOKS, {
      token: key.token,
      body: { api_key_id: key.id, url: receiver.url, events: ['docauth.completed'], headers: { Authorization: 'Bearer a-only' } },
    });
    const b = await createWebhook();
    await h.db.execute(sql`update webhooks set headers_sealed = (select headers_sealed from webhooks where id = ${a.body.data.id}) where id = ${b.id}`);
    const response = await h.request('GET', `${WEBHOOKS}/${b.id}`, { token: key.token });
    expect(response.status).toBe(500);
    expect(response.text).not.toContain('a-only');
  });

  it('sealed unbound by an earlier release still signs until secrets reseal binds it to its row', async () => {
    const { harness: h } = started;
    const legacy = await createWebhook();
    const secret = generateWebhookSecret();
    await h.db.execute(sql`update webhooks set secret_sealed = ${h.secretBox.seal(secret)} where id = ${legacy.id}`);

    const deliveryId = await sendTestEvent(legacy.id);
    expect(await firstOutcome(deliveryId)).toBe('sent');
    const [request] = requestsFor(deliveryId);
    expect(verifyWebhook({ rawBody: request!.rawBody, headers: request!.headers, secret }).data.request_id).toMatch(/^test_/);

    // The webhooks the tests above tampered with are reported, and left as they are.
    const resealed = await resealWebhookSecrets(h.db, h.secretBox);
    expect(resealed.resealed).toBe(1);
    expect(resealed.unopenable).toHaveLength(2);
    const bound = await sealedSecretOf(legacy.id);
    expect(() => h.secretBox.open(bound)).toThrow();
    const other = await createWebhook();
    await h.db.execute(sql`update webhooks set secret_sealed = ${bound} where id = ${other.id}`);
    const moved = await sendTestEvent(other.id);
    expect(await firstOutcome(moved)).toBe('send failed');
  });
});
