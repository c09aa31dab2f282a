import { readFileSync } from 'node:fs';
import type { LookupFunction } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSender, isPublicAddress } from '../../src/delivery/sender.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { createWebhookFor, publishFor, waitForDelivery } from './support.ts';

let receiver: HttpsReceiver;
beforeAll(async () => {
  receiver = await startHttpsReceiver();
});
afterAll(() => receiver.close());

/** A resolver that maps every name to one address, without DNS. */
const mapTo = (address: string): LookupFunction =>
  ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    const family = address.includes(':') ? 6 : 4;
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;

const request = (url: string) => ({ url, headers: { 'Content-Type': 'application/json' }, body: '{"id":"dlv_x"}' });

describe('address policy', () => {
  it.each([
    '127.0.0.1', '127.255.0.9', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254',
    '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fc00::1', 'fd00:ec2::254',
    'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '64:ff9b::a9fe:a9fe', 'not-an-ip',
  ])('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])('allows %s', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('the sender', () => {
  const ca = () => readFileSync(receiver.certFile);

  it.each(['https://127.0.0.1/x', 'https://[::1]/x', 'https://[::ffff:127.0.0.1]/x', 'https://169.254.169.254/latest/meta-data', 'https://10.0.0.8/'])(
    'refuses the literal address in %s without connecting',
    async (url) => {
      const sender = createSender({ timeoutMs: 2_000, allowPrivateTargets: false });
      const result = await sender.send(request(url));
      sender.close();
      expect(result.outcome).toBe('refused');
      expect(result.error).toBe('destination not allowed');
      expect(result.operatorDetail).toMatch(/not a public address/);
    },
  );

  it('refuses a DNS name that resolves to a private address, checking the address it would connect to', async () => {
    const before = receiver.connectionCount;
    const sender = createSender({ timeoutMs: 2_000, allowPrivateTargets: false, ca: ca(), lookup: mapTo('127.0.0.1') });
    const port = new URL(receiver.url).port;
    const result = await sender.send(request(`https://innocent.example.com:${port}/hooks`));
    sender.close();
    expect(result.outcome).toBe('refused');
    expect(result.error).toBe('destination not allowed');
    expect(result.operatorDetail).toBe('innocent.example.com resolves to a non-public address (127.0.0.1)');
    expect(receiver.connectionCount).toBe(before);
  });

  it('refuses a redirect to a private address by not following redirects at all', async () => {
    receiver.behave(() => ({ status: 307, headers: { Location: 'https://169.254.169.254/latest/meta-data' } }));
    const sender = createSender({ timeoutMs: 2_000, allowPrivateTargets: true, ca: ca() });
    const result = await sender.send(request(receiver.url));
    sender.close();
    expect(result).toMatchObject({ outcome: 'http_error', statusCode: 307 });
    expect(result.error).toMatch(/redirects are not followed/);
  });

  it('reuses kept-alive connections and reads at most 64 KiB of a large response', async () => {
    receiver.behave(() => ({ status: 200, body: 'x'.repeat(10) }));
    const sender = createSender({ timeoutMs: 5_000, allowPrivateTargets: true, ca: ca() });
    const before = receiver.connectionCount;
    for (let i = 0; i < 5; i += 1) expect((await sender.send(request(receiver.url))).outcome).toBe('succeeded');
    expect(receiver.connectionCount - before).toBe(1);

    receiver.behave(() => ({ status: 200, body: Buffer.alloc(5 * 1024 * 1024, 120) }));
    const big = await sender.send(request(receiver.url));
    expect(big).toMatchObject({ outcome: 'succeeded', statusCode: 200 });
    sender.close();
  });

  it('sends again on a new connection when a kept-alive one turns out closed by the endpoint, and only then', async () => {
    const sender = createSender({ timeoutMs: 5_000, allowPrivateTargets: true, ca: ca() });
    const before = { connections: receiver.connectionCount, requests: receiver.requests.length };
    // The second request comes on the connection the first left open, which the endpoint closes
    // as it arrives; the third is the same request, which must come on a new connection.
    receiver.behave((_request, index) => (index === before.requests + 1 ? 'close' : { status: 200 }));
    expect(await sender.send(request(receiver.url))).toMatchObject({ outcome: 'succeeded' });
    expect(await sender.send(request(receiver.url))).toMatchObject({ outcome: 'succeeded', statusCode: 200 });
    expect(receiver.requests.length - before.requests).toBe(3);
    expect(receiver.connectionCount - before.connections).toBe(2);
    sender.close();

    // On a new connection the same close is the endpoint's failure: recorded, not sent again.
    const fresh = createSender({ timeoutMs: 5_000, allowPrivateTargets: true, ca: ca() });
    const closedAt = receiver.requests.length;
    receiver.behave((_request, index) => (index === closedAt ? 'close' : { status: 200 }));
    expect(await fresh.send(request(receiver.url))).toMatchObject({ outcome: 'network_error', error: 'connection reset by the endpoint' });
    expect(receiver.requests.length - closedAt).toBe(1);
    fresh.close();
    receiver.behave(() => ({ status: 200 }));
  });

  it("closes an idle connection a second before the endpoint's announced idle limit, so no request crosses its close", async () => {
    const shortLived = await startHttpsReceiver({ keepAliveTimeoutMs: 2_000 });
    const sender = createSender({ timeoutMs: 5_000, allowPrivateTargets: true, ca: readFileSync(shortLived.certFile) });
    try {
      expect(await sender.send(request(shortLived.url))).toMatchObject({ outcome: 'succeeded' });
      expect(await sender.send(request(shortLived.url))).toMatchObject({ outcome: 'succeeded' });
      expect(shortLived.connectionCount).toBe(1);
      // Idle 1.5 s: within the endpoint's 2 s, past the second before it.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await sender.send(request(shortLived.url))).toMatchObject({ outcome: 'succeeded' });
      expect(shortLived.connectionCount).toBe(2);
    } finally {
      sender.close();
      await shortLived.close();
    }
  });

  it('gives up on an endpoint that does not answer within the limit', async () => {
    receiver.behave(() => 'hang');
    const sender = createSender({ timeoutMs: 500, allowPrivateTargets: true, ca: ca() });
    const result = await sender.send(request(receiver.url));
    sender.close();
    expect(result).toMatchObject({ outcome: 'timeout', error: 'no response within 500 ms' });
    receiver.behave(() => ({ status: 200 }));
  });

  it('fails TLS against an untrusted certificate unless its CA is configured', async () => {
    const sender = createSender({ timeoutMs: 2_000, allowPrivateTargets: true });
    const result = await sender.send(request(receiver.url));
    sender.close();
    expect(result.outcome).toBe('network_error');
    expect(result.error).toMatch(/SELF_SIGNED|self.signed|certificate/i);
  });
});

describe('deliveries under the outbound rules', () => {
  let strict: Harness;
  let short: Harness;
  beforeAll(async () => {
    [strict, short] = await Promise.all([
      startHarness({ worker: true, delivery: { allowPrivateTargets: false, caFile: receiver.certFile } }),
      startHarness({ worker: true, delivery: { allowPrivateTargets: true, caFile: receiver.certFile, timeoutMs: 1_000 } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([strict?.stop(), short?.stop()]);
  });

  it('records a loopback target as refused when private targets are not allowed', async () => {
    const { key, webhookId } = await createWebhookFor(strict, receiver.url);
    const { delivery_ids: [deliveryId] } = await publishFor(strict, key.projectId);
    const failed = await waitForDelivery(strict, key.token, webhookId, deliveryId!, (d) => d.status === 'failed');
    // One stable reason for the customer; which address it was goes to the operator's logs only.
    expect(failed.last_error).toBe('destination not allowed');
    const attempts = await strict.request('GET', `/api-gateway/v2/webhooks/${webhookId}/deliveries/${deliveryId}/attempts`, { token: key.token });
    expect(attempts.body.data[0]).toMatchObject({ outcome: 'refused', attempt_number: 1 });
    expect(JSON.stringify(attempts.body)).not.toContain('127.0.0.1');
  });

  it('records an endpoint that never answers as a timeout failure', async () => {
    receiver.behave(() => 'hang');
    const { key, webhookId } = await createWebhookFor(short, receiver.url);
    const { delivery_ids: [deliveryId] } = await publishFor(short, key.projectId);
    const failed = await waitForDelivery(short, key.token, webhookId, deliveryId!, (d) => d.status === 'failed');
    expect(failed.last_error).toBe('no response within 1000 ms');
    expect(failed).not.toHaveProperty('last_status_code');
    receiver.behave(() => ({ status: 200 }));
    await short.request('DELETE', `/api-gateway/v2/webhooks/${webhookId}`, { token: key.token });
  });
});
