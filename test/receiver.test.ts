import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  WebhookVerificationError,
  type VerifyWebhookOptions,
  type WebhookPayload,
  type WebhookVerificationErrorCode,
} from '../src/receiver/index.ts';
import { computeSignature } from '../src/signing.ts';

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

const secret = 'whsec_Rc7vT2mQ9xL4pW8nB1kZ6yH3dF0sJ5aG';
const timestamp = 1_700_000_000;
const nowMs = timestamp * 1000;

const payload: WebhookPayload = {
  id: 'dlv_01HZX3K9V7Q2M8N4P6R5T1W0YB',
  event: 'docauth.completed',
  timestamp: '2023-11-14T22:13:15Z',
  api_version: 'v1',
  data: {
    request_id: 'req_8f2c1a',
    session_id: 'sess_42',
    result: 'pass',
    docauth_info: { document_type: 'passport', country_code: 'FR', first_name: 'Zoë' },
    processed_at: '2023-11-14T22:13:14Z',
    scores_applied: false,
  },
};
const body = JSON.stringify(payload);

function nodeHeaders(
  rawBody: string | Uint8Array,
  signingSecret = secret,
  signedTimestamp: number = timestamp,
): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-service-signature': computeSignature(signingSecret, signedTimestamp, rawBody),
    'x-service-timestamp': String(signedTimestamp),
    'x-service-delivery-id': payload.id,
    'x-service-event': payload.event,
  };
}

function verify(overrides: Partial<VerifyWebhookOptions> = {}): WebhookPayload {
  return verifyWebhook({ rawBody: body, headers: nodeHeaders(body), secret, now: nowMs, ...overrides });
}

function rejectionOf(run: () => unknown): WebhookVerificationError {
  try {
    run();
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error;
    throw error;
  }
  throw new Error('expected a WebhookVerificationError, but verification passed');
}

function expectRejection(run: () => unknown, code: WebhookVerificationErrorCode): void {
  expect(rejectionOf(run).code).toBe(code);
}

function withHeader(name: string, value: string | undefined, rawBody: string = body): Record<string, string> {
  const headers = nodeHeaders(rawBody);
  if (value === undefined) delete headers[name];
  else headers[name] = value;
  return headers;
}

function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('verifyWebhook accepts', () => {
  it('a valid request with node:http style lowercase headers and returns the parsed payload', () => {
    expect(verify()).toEqual(payload);
  });

  it('a valid request with a WHATWG Headers instance', () => {
    const headers = new Headers(nodeHeaders(body));
    expect(verify({ headers })).toEqual(payload);
  });

  it('header names in any case in a plain object', () => {
    const headers = {
      'X-Service-Signature': computeSignature(secret, timestamp, body),
      'X-SERVICE-TIMESTAMP': String(timestamp),
    };
    expect(verify({ headers })).toEqual(payload);
  });

  it('a secret array where only the second secret is right', () => {
    expect(verify({ secret: ['whsec_old_secret_no_longer_used', secret] })).toEqual(payload);
  });

  it('a header carrying several signatures, ignoring unknown versions, when one v1 signature matches', () => {
    const wrongV1 = computeSignature('whsec_other', timestamp, body);
    const right = computeSignature(secret, timestamp, body);
    const headers = withHeader('x-service-signature', `v0=legacy ${wrongV1}, ${right}`);
    expect(verify({ headers })).toEqual(payload);
  });

  it.each([
    ['after it', (right: string, malformed: string) => `${right} ${malformed}`],
    ['before it', (right: string, malformed: string) => `${malformed} ${right}`],
  ])('a matching v1 signature with malformed v1 values %s, ignoring them', (_case, header) => {
    const right = computeSignature(secret, timestamp, body);
    const uppercaseHex = `v1=${computeSignature('whsec_other', timestamp, body).slice(3).toUpperCase()}`;
    for (const malformed of ['v1=deadbeef', uppercaseHex]) {
      expect(verify({ headers: withHeader('x-service-signature', header(right, malformed)) })).toEqual(payload);
    }
  });

  it('a signature header repeated as a node:http string array', () => {
    const headers = {
      'x-service-signature': [computeSignature('whsec_other', timestamp, body), computeSignature(secret, timestamp, body)],
      'x-service-timestamp': String(timestamp),
    };
    expect(verify({ headers })).toEqual(payload);
  });

  it('timestamps exactly at the edge of the tolerance, in the past and the future', () => {
    expect(verify({ now: nowMs + WEBHOOK_TOLERANCE_SECONDS * 1000 })).toEqual(payload);
    expect(verify({ now: nowMs - WEBHOOK_TOLERANCE_SECONDS * 1000 })).toEqual(payload);
  });

  it('now given as a Date and a custom toleranceSeconds', () => {
    expect(verify({ now: new Date(nowMs + 600_000), toleranceSeconds: 600 })).toEqual(payload);
  });

  it('a UTF-8 body given as a Uint8Array, signed over the raw bytes', () => {
    const utf8Vector = vectors.find(({ body: vectorBody }) => vectorBody.includes('東京'));
    if (!utf8Vector) throw new Error('fixture lacks the UTF-8 vector');
    const rawBody = new TextEncoder().encode(utf8Vector.body);
    const received = verifyWebhook({
      rawBody,
      headers: { 'x-service-signature': utf8Vector.signature, 'x-service-timestamp': String(utf8Vector.timestamp) },
      secret: utf8Vector.secret,
      now: utf8Vector.timestamp * 1000,
    });
    expect(received.data.docauth_info).toMatchObject({ first_name: 'Zoë', last_name: '東京' });
  });

  it.skipIf(!opensslAvailable())('a fresh random payload signed by the openssl CLI', () => {
    const liveSecret = `whsec_${randomBytes(24).toString('base64')}`;
    const liveTimestamp = Math.floor(Date.now() / 1000);
    const livePayload = {
      ...payload,
      id: `dlv_${randomBytes(8).toString('hex')}`,
      data: { ...payload.data, session_id: `Zoë 東京 ${randomBytes(16).toString('base64')}\n${randomInt(1e9)}` },
    };
    const rawBody = Buffer.from(JSON.stringify(livePayload, null, randomInt(3)), 'utf8');
    const digest = execFileSync('openssl', ['dgst', '-sha256', '-hmac', liveSecret, '-r'], {
      input: Buffer.concat([Buffer.from(`${liveTimestamp}.`), rawBody]),
    })
      .toString()
      .split(' ')[0];

    const received = verifyWebhook({
      rawBody,
      headers: new Headers({ 'X-Service-Signature': `v1=${digest}`, 'X-Service-Timestamp': String(liveTimestamp) }),
      secret: liveSecret,
    });
    expect(received).toEqual(livePayload);
  });
});

describe('verifyWebhook against the openssl vectors', () => {
  const payloadVectors = vectors.filter((vector) => vector.body !== '{}');

  it.each(payloadVectors)('accepts $name as a string and as bytes', (vector) => {
    const options = {
      headers: { 'x-service-signature': vector.signature, 'x-service-timestamp': String(vector.timestamp) },
      secret: vector.secret,
      now: vector.timestamp * 1000,
    };
    const expected: unknown = JSON.parse(vector.body);
    expect(verifyWebhook({ ...options, rawBody: vector.body })).toEqual(expected);
    expect(verifyWebhook({ ...options, rawBody: Buffer.from(vector.body, 'utf8') })).toEqual(expected);
  });

  it('rejects the genuinely signed "{}" vector as invalid_payload', () => {
    const emptyObject = vectors.find((vector) => vector.body === '{}');
    if (!emptyObject) throw new Error('fixture lacks the {} vector');
    expectRejection(
      () =>
        verifyWebhook({
          rawBody: emptyObject.body,
          headers: { 'x-service-signature': emptyObject.signature, 'x-service-timestamp': String(emptyObject.timestamp) },
          secret: emptyObject.secret,
          now: emptyObject.timestamp * 1000,
        }),
      'invalid_payload',
    );
  });
});

describe('verifyWebhook rejects', () => {
  it('a missing or empty signature header with missing_signature', () => {
    expectRejection(() => verify({ headers: withHeader('x-service-signature', undefined) }), 'missing_signature');
    expectRejection(() => verify({ headers: withHeader('x-service-signature', '') }), 'missing_signature');
    expectRejection(
      () => verify({ headers: new Headers({ 'X-Service-Timestamp': String(timestamp) }) }),
      'missing_signature',
    );
  });

  it('a missing timestamp header with missing_timestamp', () => {
    expectRejection(() => verify({ headers: withHeader('x-service-timestamp', undefined) }), 'missing_timestamp');
  });

  it.each([
    ['no v1= prefix', computeSignature(secret, timestamp, body).slice(3)],
    ['non-hex characters', `v1=${'z'.repeat(64)}`],
    ['63 hex characters', computeSignature(secret, timestamp, body).slice(0, -1)],
    ['65 hex characters', `${computeSignature(secret, timestamp, body)}0`],
    ['uppercase hex', computeSignature(secret, timestamp, body).toUpperCase().replace('V1=', 'v1=')],
    ['only an unknown version', `v2=${'a'.repeat(64)}`],
    ['only malformed v1 values', `v1=deadbeef v1=${'A'.repeat(64)}`],
  ])('a signature with %s as malformed_signature', (_case, signature) => {
    expectRejection(() => verify({ headers: withHeader('x-service-signature', signature) }), 'malformed_signature');
  });

  it.each(['abc', '12.5', '-1700000000', '1.7e9', '99999999999999999999'])(
    'the timestamp %j as malformed_timestamp',
    (value) => {
      expectRejection(() => verify({ headers: withHeader('x-service-timestamp', value) }), 'malformed_timestamp');
    },
  );

  it('a timestamp 301 s old as timestamp_out_of_tolerance', () => {
    expectRejection(() => verify({ now: nowMs + 301_000 }), 'timestamp_out_of_tolerance');
  });

  it('a timestamp 301 s in the future as timestamp_out_of_tolerance', () => {
    expectRejection(() => verify({ now: nowMs - 301_000 }), 'timestamp_out_of_tolerance');
  });

  it('a body with one byte changed as signature_mismatch', () => {
    const tampered = Buffer.from(body, 'utf8');
    const index = tampered.indexOf('pass');
    tampered[index] = 'P'.charCodeAt(0);
    expectRejection(() => verify({ rawBody: tampered }), 'signature_mismatch');
  });

  it('a timestamp header changed after signing as signature_mismatch', () => {
    expectRejection(
      () => verify({ headers: withHeader('x-service-timestamp', String(timestamp + 1)) }),
      'signature_mismatch',
    );
  });

  it('a request signed with another secret as signature_mismatch', () => {
    expectRejection(() => verify({ secret: 'whsec_wrong_secret' }), 'signature_mismatch');
    expectRejection(() => verify({ secret: ['whsec_wrong_one', 'whsec_wrong_two'] }), 'signature_mismatch');
  });

  it.each([
    ['not JSON', 'not json at all'],
    ['missing id', JSON.stringify({ ...payload, id: undefined })],
    ['a numeric id', JSON.stringify({ ...payload, id: 42 })],
    ['data not an object', JSON.stringify({ ...payload, data: 'x' })],
    ['a JSON array', JSON.stringify([payload])],
    ['JSON null', 'null'],
  ])('a genuinely signed body that is %s as invalid_payload', (_case, rawBody) => {
    expectRejection(() => verify({ rawBody, headers: nodeHeaders(rawBody) }), 'invalid_payload');
  });

  it('genuinely signed bytes that are not UTF-8 as invalid_payload', () => {
    const rawBody = new Uint8Array([0x7b, 0xff, 0x7d]);
    expectRejection(() => verify({ rawBody, headers: nodeHeaders(rawBody) }), 'invalid_payload');
  });
});

describe('verifyWebhook check order', () => {
  it('reports a missing signature before a malformed timestamp', () => {
    expectRejection(() => verify({ headers: { 'x-service-timestamp': 'abc' } }), 'missing_signature');
  });

  it('reports a malformed signature before a stale timestamp', () => {
    const headers = withHeader('x-service-signature', 'v1=nothex');
    expectRejection(() => verify({ headers, now: nowMs + 3_600_000 }), 'malformed_signature');
  });

  it('reports a stale timestamp before a wrong signature', () => {
    expectRejection(() => verify({ secret: 'whsec_wrong', now: nowMs + 3_600_000 }), 'timestamp_out_of_tolerance');
  });

  it('reports a wrong signature before an invalid payload', () => {
    expectRejection(() => verify({ rawBody: '{}', headers: nodeHeaders(body) }), 'signature_mismatch');
  });
});

describe('WebhookVerificationError', () => {
  it('is an Error with a name, a code and a message', () => {
    const error = rejectionOf(() => verify({ secret: 'whsec_wrong' }));
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('WebhookVerificationError');
    expect(error.message).toMatch(/X-Service-Signature/);
  });
});

describe('verifyWebhook refuses unusable options', () => {
  it('throws TypeError for an empty secret or secret list, which would otherwise be forgeable', () => {
    expect(() => verify({ secret: '' })).toThrow(TypeError);
    expect(() => verify({ secret: [] })).toThrow(TypeError);
    expect(() => verify({ secret: [secret, ''] })).toThrow(TypeError);
  });

  it('throws RangeError for a negative tolerance', () => {
    expect(() => verify({ toleranceSeconds: -1 })).toThrow(RangeError);
  });
});
