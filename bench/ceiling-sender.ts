/**
 * The ceiling: the activity's own send path with no Temporal and no database. Each send does
 * what `sendDelivery` does between loading its context and recording the attempt: open the
 * sealed secret (AES-GCM), build the body (`buildNotificationBody`), sign it
 * (`buildNotificationHeaders`) and POST it with the worker's sender (`createSender`, same
 * options as src/temporal/worker.ts). Run as its own process (forked by bench/run.ts) so its CPU is
 * measured apart from the receiver's.
 *
 * argv[2] is a JSON {@link CeilingOptions}; it reports {@link FromCeiling} messages over IPC.
 */
import { readFileSync } from 'node:fs';
import { buildNotificationBody, buildNotificationHeaders } from '../src/delivery/notification.ts';
import { createSender } from '../src/delivery/sender.ts';
import { newId } from '../src/ids.ts';
import { generateEncryptionKey, SecretBox } from '../src/secrets/crypto.ts';
import { docauthData } from '../test/support/event-data.ts';

export interface CeilingOptions {
  url: string;
  caFile: string;
  secret: string;
  durationS: number;
  /** Sends in flight at once (the sender's agent opens a socket for each; places per endpoint are not modelled here). */
  concurrency: number;
  timeoutMs: number;
  /** Give the sender the CA as its `ca` option (as the worker does with DELIVERY_CA_FILE); else NODE_EXTRA_CA_CERTS is set. */
  caOption: boolean;
}

export type FromCeiling =
  | { type: 'ready'; t: number }
  | { type: 'starts'; ids: string[]; t: number[]; sendMs: number[]; failed: number }
  | { type: 'done'; sent: number; succeeded: number; failed: number; errors: string[] };

const options = JSON.parse(process.argv[2] ?? '{}') as CeilingOptions;
const send = (message: FromCeiling) => process.send?.(message);

const secretBox = new SecretBox(generateEncryptionKey());
const sealed = secretBox.seal(options.secret);
const customHeaders = { 'X-Customer-Tag': 'bench' };
const occurredAt = new Date();
const sender = createSender({
  timeoutMs: options.timeoutMs,
  allowPrivateTargets: true,
  ca: options.caOption ? readFileSync(options.caFile) : undefined,
});

let batch = { ids: [] as string[], t: [] as number[], sendMs: [] as number[], failed: 0 };
let sent = 0;
let succeeded = 0;
let failed = 0;
const errors: string[] = [];
const flush = () => {
  send({ type: 'starts', ...batch });
  batch = { ids: [], t: [], sendMs: [], failed: 0 };
};
const timer = setInterval(flush, 100);

async function one(seq: number, measured = true): Promise<void> {
  const deliveryId = newId('delivery');
  const started = performance.timeOrigin + performance.now();
  const body = buildNotificationBody({ deliveryId, event: 'docauth.completed', occurredAt, data: docauthData({ request_id: `req_bench_${seq}` }) });
  const headers = buildNotificationHeaders({
    secrets: [secretBox.open(sealed)],
    standardWebhooks: false,
    timestampSeconds: Math.floor(Date.now() / 1000),
    body,
    deliveryId,
    event: 'docauth.completed',
    customHeaders,
  });
  if (measured) sent += 1;
  const result = await sender.send({ url: options.url, headers, body });
  if (!measured) return;
  if (result.outcome === 'succeeded') {
    succeeded += 1;
    batch.ids.push(deliveryId);
    batch.t.push(started);
    batch.sendMs.push(performance.timeOrigin + performance.now() - started);
  } else {
    failed += 1;
    batch.failed += 1;
    if (errors.length < 5) errors.push(`${result.outcome}: ${result.error ?? result.statusCode}`);
  }
}

// Warm-up, not measured: open the connections (TLS handshakes) and let the JIT settle.
let seq = 0;
const warmUntil = performance.now() + 2_000;
await Promise.all(
  Array.from({ length: options.concurrency }, async () => {
    while (performance.now() < warmUntil) await one(seq++, false);
  }),
);
batch = { ids: [], t: [], sendMs: [], failed: 0 };
send({ type: 'ready', t: performance.timeOrigin + performance.now() });

const deadline = performance.now() + options.durationS * 1000;
await Promise.all(
  Array.from({ length: options.concurrency }, async () => {
    while (performance.now() < deadline) await one(seq++);
  }),
);
clearInterval(timer);
flush();
sender.close();
send({ type: 'done', sent, succeeded, failed, errors });
process.disconnect?.();
