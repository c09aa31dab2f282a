/**
 * The benchmark's HTTPS receiver, run as its own process (forked by bench/run.ts with an IPC
 * channel). It verifies every signature with the service's receiver library, answers at once
 * (200, or 500 for a share of requests given by the fail ratio), deduplicates by delivery id,
 * and reports what it got to the parent in batches. With `holdMs` it is a hanging endpoint
 * instead: it reads and verifies each request, then keeps it open. The parent can change that
 * behaviour while it runs (a failing endpoint that recovers).
 *
 * argv[2] is a JSON {@link ReceiverOptions}. Messages from the parent: {@link ToReceiver};
 * to the parent: {@link FromReceiver}.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { verifyWebhook, WebhookVerificationError } from '../src/receiver/index.ts';
import { SIGNATURE_HEADERS } from '../src/signing.ts';

export interface ReceiverOptions {
  keyFile: string;
  certFile: string;
  /** The loopback address to listen on [127.0.0.1]; the certificate must name it. */
  host?: string;
  /** Share of requests answered 500 (0..1). */
  failRatio: number;
  /**
   * A delivery is failed at most this many times, so it lands within one round of
   * retries (the service makes 5 attempts per round). 0 = no cap.
   */
  failCap: number;
  /**
   * Hold every verified request this long before answering 200 (absent: answer at once). Longer
   * than the service's 30 s limit, the endpoint hangs: the sender gives up first.
   */
  holdMs?: number;
  /** How often batches are sent to the parent. */
  batchMs?: number;
}

/** How the receiver answers; the parent may change it while it runs. */
export type ReceiverBehaviour = Pick<ReceiverOptions, 'failRatio' | 'failCap' | 'holdMs'>;

export type ToReceiver =
  | { type: 'secrets'; secrets: string[] }
  | { type: 'behaviour'; behaviour: Partial<ReceiverBehaviour> }
  | { type: 'flush' }
  | { type: 'stop' };

/** Columns of the requests received since the last batch. */
export interface ReceiverBatch {
  type: 'batch';
  /** Delivery id (X-Service-Delivery-ID), '' when absent. */
  ids: string[];
  /** Epoch milliseconds (performance.timeOrigin + performance.now()) when the body had arrived. */
  t: number[];
  /** Status answered: 200, 500 (injected failure), 400 (verification failed), or 0 (held: `holdMs`). */
  status: number[];
  /** 1 when the delivery had already been answered 200 before (a duplicate delivery). */
  dup: number[];
  counters: ReceiverCounters;
}

export interface ReceiverCounters {
  requests: number;
  delivered: number;
  duplicates: number;
  invalidSignatures: number;
  injectedFailures: number;
  tlsConnections: number;
  /** Requests read and not answered yet, their connection still open. */
  openRequests: number;
  /** The most requests open at once since the start. */
  maxOpenRequests: number;
  /** Up to 5 examples of why a verification failed. */
  invalidExamples: string[];
}

export type FromReceiver =
  | { type: 'listening'; port: number }
  | ReceiverBatch
  | { type: 'flushed' };

const options = JSON.parse(process.argv[2] ?? '{}') as ReceiverOptions;
const send = (message: FromReceiver) => process.send?.(message);

let secrets: string[] = [];
const delivered = new Set<string>();
const failures = new Map<string, number>();
const counters: ReceiverCounters = {
  requests: 0,
  delivered: 0,
  duplicates: 0,
  invalidSignatures: 0,
  injectedFailures: 0,
  tlsConnections: 0,
  openRequests: 0,
  maxOpenRequests: 0,
  invalidExamples: [],
};
let batch = { ids: [] as string[], t: [] as number[], status: [] as number[], dup: [] as number[] };

function flush(): void {
  if (batch.ids.length === 0) {
    send({ type: 'batch', ids: [], t: [], status: [], dup: [], counters });
    return;
  }
  send({ type: 'batch', ...batch, counters });
  batch = { ids: [], t: [], status: [], dup: [] };
}

/** Webhook index from the path `/hooks/<index>`. */
function secretFor(path: string | undefined): string | undefined {
  const match = /^\/hooks\/(\d+)/.exec(path ?? '');
  return match ? secrets[Number(match[1])] : undefined;
}

const server = createServer(
  { key: readFileSync(options.keyFile), cert: readFileSync(options.certFile) },
  (req, res) => {
    counters.openRequests += 1;
    counters.maxOpenRequests = Math.max(counters.maxOpenRequests, counters.openRequests);
    res.once('close', () => {
      counters.openRequests -= 1;
    });
    const answer = (status: number) => res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': '2' }).end(status === 200 ? 'ok' : 'no');
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const receivedAt = performance.timeOrigin + performance.now();
      counters.requests += 1;
      const rawBody = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const header = req.headers[SIGNATURE_HEADERS.deliveryId.toLowerCase()];
      let id = typeof header === 'string' ? header : '';
      let status = 200;
      let dup = 0;
      const secret = secretFor(req.url);
      try {
        if (!secret) throw new WebhookVerificationError('signature_mismatch', `no secret for ${req.url}`);
        const payload = verifyWebhook({ rawBody, headers: req.headers, secret });
        if (payload.id !== id) throw new WebhookVerificationError('invalid_payload', 'body id differs from the delivery id header');
        id = payload.id;
      } catch (error) {
        status = 400;
        counters.invalidSignatures += 1;
        if (counters.invalidExamples.length < 5) {
          counters.invalidExamples.push(error instanceof WebhookVerificationError ? `${error.code}: ${error.message}` : String(error));
        }
      }
      if (status === 200 && options.holdMs) {
        // Answered later, if the sender still waits by then (its connection closing clears the timer).
        const timer = setTimeout(() => answer(200), options.holdMs);
        res.once('close', () => clearTimeout(timer));
        status = 0;
      } else if (status === 200 && options.failRatio > 0 && !delivered.has(id)) {
        const failed = failures.get(id) ?? 0;
        if ((options.failCap === 0 || failed < options.failCap) && Math.random() < options.failRatio) {
          failures.set(id, failed + 1);
          counters.injectedFailures += 1;
          status = 500;
        }
      }
      if (status === 200) {
        if (delivered.has(id)) {
          dup = 1;
          counters.duplicates += 1;
        } else {
          delivered.add(id);
          failures.delete(id);
          counters.delivered += 1;
        }
      }
      if (status !== 0) answer(status);
      batch.ids.push(id);
      batch.t.push(receivedAt);
      batch.status.push(status);
      batch.dup.push(dup);
    });
  },
);
// Long-lived keep-alive connections, as a production receiver behind a load balancer keeps them.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.on('secureConnection', () => {
  counters.tlsConnections += 1;
});

const timer = setInterval(flush, options.batchMs ?? 100);

process.on('message', (message: ToReceiver) => {
  if (message.type === 'secrets') secrets = message.secrets;
  else if (message.type === 'behaviour') Object.assign(options, message.behaviour);
  else if (message.type === 'flush') {
    flush();
    send({ type: 'flushed' });
  } else if (message.type === 'stop') {
    clearInterval(timer);
    flush();
    server.closeAllConnections();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  }
});
// The parent went away (killed): do not linger.
process.on('disconnect', () => process.exit(0));

server.listen(0, options.host ?? '127.0.0.1', () => {
  const address = server.address();
  send({ type: 'listening', port: typeof address === 'object' && address ? address.port : 0 });
});
