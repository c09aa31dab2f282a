import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { NON_RETRYABLE, NON_RETRYABLE_REASONS } from '../../workflows/failure-types.ts';
import { harnessWithReceiver } from '../support/harness.ts';
import { BASE, createWebhookFor, publishFor, waitForDelivery } from './support.ts';

/*
 * A delivery whose sealed data does not open (a key the service no longer has, an altered row)
 * can never be sent: it is dead-lettered at its first attempt, which says it sent nothing, instead
 * of five attempts recorded as timeouts of an endpoint that was never called.
 */

const started = harnessWithReceiver();

it('dead-letters at once, with one refused attempt that sent nothing and a last_error that says why', async () => {
  const { harness: h, receiver } = started;
  const { key, webhookId } = await createWebhookFor(h, receiver.url, { headers: { Authorization: 'Bearer endpoint-credential' } });
  const other = await createWebhookFor(h, receiver.url, { headers: { Authorization: 'Bearer another' } });
  // Its headers altered: another webhook's sealed headers, which open for that webhook only.
  await h.db.execute(sql`update webhooks set headers_sealed = (select headers_sealed from webhooks where id = ${other.webhookId}) where id = ${webhookId}`);

  const [deliveryId] = (await publishFor(h, key.projectId)).delivery_ids;
  const dead = await waitForDelivery(h, key.token, webhookId, deliveryId!, (delivery) => delivery.status === 'dead_letter');
  expect(dead).toMatchObject({ attempt_count: 1, last_error: NON_RETRYABLE_REASONS[NON_RETRYABLE.sealedDataUnopenable] });
  const attempts = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}/attempts`, { token: key.token });
  expect(attempts.body.data).toEqual([
    expect.objectContaining({ attempt_number: 1, outcome: 'refused', error: expect.stringMatching(/^not sent: the sealed headers of webhook wh_\w+ does not open/) }),
  ]);
  expect(receiver.requests).toEqual([]);
}, 60_000);
