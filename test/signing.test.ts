import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import {
  computeSignature,
  computeSignatureHeader,
  computeStandardWebhooksSignature,
  SIGNATURE_HEADERS,
  SIGNATURE_VERSION,
  signatureMatches,
  standardWebhooksKey,
} from '../src/signing.ts';
import { buildNotificationHeaders } from '../src/delivery/notification.ts';
import { generateWebhookSecret } from '../src/secrets/crypto.ts';

interface SignatureVector {
  name: string;
  secret: string;
  timestamp: number;
  body: string;
  signature: string;
}

const vectors: SignatureVector[] = JSON.parse(
  readFileSync(new URL('./fixtures/signature-vectors.json', import.meta.url), 'utf8'),
);

function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function opensslSignature(secret: string, message: Uint8Array): string {
  const output = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret, '-r'], { input: message }).toString();
  return `v1=${output.split(' ')[0]}`;
}

describe('signature vectors fixture', () => {
  it('covers the cases the signing recipe must get right', () => {
    expect(vectors.length).toBeGreaterThanOrEqual(6);
    expect(vectors.some(({ body }) => Buffer.byteLength(body) > body.length)).toBe(true);
    expect(vectors.some(({ body }) => body === '{}')).toBe(true);
    expect(vectors.some(({ body }) => Buffer.byteLength(body) > 4096)).toBe(true);
    expect(vectors.some(({ secret }) => ['+', '/', '='].every((character) => secret.includes(character)))).toBe(true);
    expect(vectors.some(({ body }) => body.includes('\n'))).toBe(true);
  });
});

describe('computeSignature', () => {
  it.each(vectors)('reproduces the openssl vector $name from a string body', (vector) => {
    expect(computeSignature(vector.secret, vector.timestamp, vector.body)).toBe(vector.signature);
  });

  it.each(vectors)('reproduces the openssl vector $name from a Uint8Array body', (vector) => {
    const bodyBytes = new TextEncoder().encode(vector.body);
    expect(computeSignature(vector.secret, vector.timestamp, bodyBytes)).toBe(vector.signature);
    expect(computeSignature(vector.secret, String(vector.timestamp), Buffer.from(vector.body, 'utf8'))).toBe(
      vector.signature,
    );
  });

  it('formats the result as v1= and 64 lowercase hex characters', () => {
    expect(computeSignature('whsec_test', 1700000000, '{"id":"dlv_x"}')).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(SIGNATURE_VERSION).toBe('v1');
  });

  it('signs Uint8Array bytes as they are, even when they are not valid UTF-8', () => {
    const invalidUtf8 = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]);
    const reencoded = new TextEncoder().encode(new TextDecoder().decode(invalidUtf8));
    expect(computeSignature('whsec_test', 1, invalidUtf8)).not.toBe(computeSignature('whsec_test', 1, reencoded));
  });

  it.skipIf(!opensslAvailable())('agrees with the openssl CLI on fresh random secrets, timestamps and bytes', () => {
    for (let round = 0; round < 10; round++) {
      const secret = `whsec_${randomBytes(24).toString('base64')}`;
      const timestamp = 1_600_000_000 + randomBytes(3).readUIntBE(0, 3);
      const body = randomBytes(1 + randomBytes(2).readUInt16BE(0));
      const message = Buffer.concat([Buffer.from(`${timestamp}.`), body]);
      expect(computeSignature(secret, timestamp, body)).toBe(opensslSignature(secret, message));
    }
  });
});

describe('signatureMatches', () => {
  const signature = computeSignature('whsec_test', 1700000000, '{}');

  it('is true for identical signatures', () => {
    expect(signatureMatches(signature, computeSignature('whsec_test', 1700000000, '{}'))).toBe(true);
  });

  it('is false for a different signature of the same length', () => {
    const lastCharacterFlipped = signature.slice(0, -1) + (signature.endsWith('0') ? '1' : '0');
    expect(signatureMatches(signature, lastCharacterFlipped)).toBe(false);
  });

  it('is false without throwing when lengths differ', () => {
    expect(signatureMatches(signature, signature.slice(0, -1))).toBe(false);
    expect(signatureMatches(signature, '')).toBe(false);
    // Same number of characters, different number of UTF-8 bytes.
    expect(signatureMatches('abc', 'abé')).toBe(false);
  });
});

describe('SIGNATURE_HEADERS', () => {
  it('names the headers of spec section 6.2', () => {
    expect(SIGNATURE_HEADERS).toEqual({
      signature: 'X-Service-Signature',
      timestamp: 'X-Service-Timestamp',
      deliveryId: 'X-Service-Delivery-ID',
      event: 'X-Service-Event',
    });
  });
});

/** The Standard Webhooks signature of `message` under the raw key `key`, by the openssl CLI. */
function opensslStandardSignature(key: Buffer, message: Uint8Array): string {
  const digest = execFileSync('openssl', ['dgst', '-sha256', '-mac', 'HMAC', '-macopt', `hexkey:${key.toString('hex')}`, '-binary'], { input: message });
  return `v1,${digest.toString('base64')}`;
}

describe('several secrets (a rotation\'s grace period)', () => {
  it('signs with each, in the order given, space-separated; one secret gives exactly one v1=<hex>', () => {
    const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
    const body = '{"id":"dlv_x"}';
    expect(computeSignatureHeader([current], 1700000000, body)).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(computeSignatureHeader([current, previous], 1700000000, body)).toBe(
      `${computeSignature(current, 1700000000, body)} ${computeSignature(previous, 1700000000, body)}`,
    );
  });

  it.skipIf(!opensslAvailable())('agrees with the openssl CLI for both signatures', () => {
    const secrets = [generateWebhookSecret(), generateWebhookSecret()];
    const body = randomBytes(300);
    const message = Buffer.concat([Buffer.from('1700000123.'), body]);
    expect(computeSignatureHeader(secrets, 1700000123, body)).toBe(secrets.map((secret) => opensslSignature(secret, message)).join(' '));
  });
});

describe('Standard Webhooks', () => {
  // The vector published with the Standard Webhooks specification (standard-webhooks/standard-webhooks).
  const published = {
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    timestamp: 1614265330,
    body: '{"test": 2432232314}',
    signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  };

  it("reproduces the specification's published vector", () => {
    expect(computeStandardWebhooksSignature([published.secret], published.id, published.timestamp, published.body)).toBe(published.signature);
  });

  it('derives the key from the base64 after whsec_, while the service\'s own scheme keys with the whole string', () => {
    const secret = generateWebhookSecret();
    expect(standardWebhooksKey(secret)).toEqual(Buffer.from(secret.slice('whsec_'.length), 'base64'));
    expect(standardWebhooksKey(secret)).toHaveLength(32);
  });

  it.skipIf(!opensslAvailable())('agrees with the openssl CLI on fresh secrets, ids, timestamps and bytes, one or two secrets', () => {
    for (let round = 0; round < 10; round++) {
      const secrets = round % 2 === 0 ? [generateWebhookSecret()] : [generateWebhookSecret(), generateWebhookSecret()];
      const id = `dlv_${randomBytes(8).toString('hex')}`;
      const timestamp = 1_600_000_000 + randomBytes(3).readUIntBE(0, 3);
      const body = randomBytes(1 + randomBytes(2).readUInt16BE(0));
      const message = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
      const expected = secrets.map((secret) => opensslStandardSignature(Buffer.from(secret.slice('whsec_'.length), 'base64'), message)).join(' ');
      expect(computeStandardWebhooksSignature(secrets, id, timestamp, body)).toBe(expected);
    }
  });

  it('is verified by the maintained Standard Webhooks library with either secret of a rotation, and not with another', () => {
    const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
    const body = '{"id":"dlv_01","event":"docauth.completed"}';
    const timestampSeconds = Math.floor(Date.now() / 1000);
    const headers = buildNotificationHeaders({
      secrets: [current, previous],
      standardWebhooks: true,
      timestampSeconds,
      body,
      deliveryId: 'dlv_01',
      event: 'docauth.completed',
      customHeaders: { 'webhook-id': 'spoofed', 'X-Tag': 'kept' },
    });
    expect(headers).toMatchObject({ 'webhook-id': 'dlv_01', 'webhook-timestamp': String(timestampSeconds), 'X-Tag': 'kept' });
    expect(headers['X-Service-Signature']!.split(' ')).toHaveLength(2);
    for (const secret of [current, previous]) {
      expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    }
    expect(() => new Webhook(generateWebhookSecret()).verify(body, headers)).toThrow(/No matching signature/);
  });

  it('adds no Standard Webhooks header to a webhook that did not ask for them', () => {
    const headers = buildNotificationHeaders({
      secrets: [generateWebhookSecret()],
      standardWebhooks: false,
      timestampSeconds: 1700000000,
      body: '{}',
      deliveryId: 'dlv_01',
      event: 'docauth.completed',
      customHeaders: {},
    });
    expect(Object.keys(headers).filter((name) => name.startsWith('webhook-'))).toEqual([]);
    expect(headers['X-Service-Signature']).toMatch(/^v1=[0-9a-f]{64}$/);
  });
});
