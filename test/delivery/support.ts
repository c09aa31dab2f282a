import { createHmac } from 'node:crypto';
import { expect } from 'vitest';
import type { Harness } from '../support/harness.ts';
import { docauthData } from '../support/harness.ts';
import type { ReceivedRequest } from '../support/https-receiver.ts';
import { deadlineIn } from '../support/wait.ts';

export const BASE = '/api-gateway/v2';

/** Creates an API key and a webhook pointing at `url`; returns the ids and the secret. */
export async function createWebhookFor(h: Harness, url: string, extra: Record<string, unknown> = {}) {
  const key = await h.createKey();
  const response = await h.request('POST', `${BASE}/webhooks`, {
    token: key.token,
    body: { api_key_id: key.id, url, events: ['docauth.completed'], ...extra },
  });
  expect(response.status).toBe(201);
  return { key, webhookId: response.body.data.id as string, secret: response.body.data.secret as string };
}

/** Publishes one event for `projectId` and returns the 202 body's data. */
export async function publishFor(h: Harness, projectId: string, extra: Record<string, unknown> = {}) {
  const response = await h.publish({ project_id: projectId, event: 'docauth.completed', data: docauthData(), ...extra });
  expect(response.status).toBe(202);
  return response.body.data as { event_id: string; delivery_ids: string[] };
}

/** Polls the delivery through the API until `predicate` holds. */
export async function waitForDelivery(
  h: Harness,
  token: string,
  webhookId: string,
  deliveryId: string,
  predicate: (delivery: Record<string, any>) => boolean,
  timeoutMs = 45_000,
): Promise<Record<string, any>> {
  const deadline = deadlineIn(timeoutMs);
  let last: Record<string, any> | undefined;
  while (!deadline.passed()) {
    const response = await h.request('GET', `${BASE}/webhooks/${webhookId}/deliveries/${deliveryId}`, { token });
    last = response.body?.data;
    if (last && predicate(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`delivery ${deliveryId} did not reach the expected state; last seen: ${JSON.stringify(last)}`);
}

/** Recomputes the signature of a received request from its raw bytes, independently of the service's code. */
export function expectValidSignature(request: ReceivedRequest, secret: string): void {
  const timestamp = String(request.headers['x-service-timestamp']);
  expect(timestamp).toMatch(/^\d{10}$/);
  const expected = createHmac('sha256', secret)
    .update(Buffer.concat([Buffer.from(`${timestamp}.`), request.rawBody]))
    .digest('hex');
  expect(request.headers['x-service-signature']).toBe(`v1=${expected}`);
}
