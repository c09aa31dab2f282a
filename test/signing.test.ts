import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { computeSignature, SIGNATURE_HEADERS, SIGNATURE_VERSION, signatureMatches } from '../src/signing.ts';

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
