import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { loopbackCertificate } from '../../bench/lib/loopback-certificate.ts';
import type { LocalCertificate } from '../../src/cli/certificate.ts';

/**
 * A fresh self-signed certificate for 127.0.0.1, 127.0.0.2 and localhost in a temporary folder:
 * receivers on either loopback address are two destinations (hosts) to the service, under one
 * certificate it trusts.
 */
export function makeSelfSignedCertificate(): LocalCertificate & { cleanup(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'receiver-cert-'));
  return { ...loopbackCertificate(dir, 1), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Where a receiver listens, and with which certificate (its own by default). */
export interface ReceiverOptions {
  /** A loopback address: 127.0.0.1 (the default) or 127.0.0.2, another destination host. */
  host?: string;
  /** A certificate shared with another receiver (the service trusts one file); the receiver's own otherwise. */
  certificate?: LocalCertificate;
  /** How long an idle kept-alive connection stays open (announced in `Keep-Alive: timeout=`); Node's 5 s otherwise. */
  keepAliveTimeoutMs?: number;
}

/** One request the receiver got, with its body exactly as the bytes arrived. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  /** The sender's address (which container or process sent it). */
  remoteAddress: string;
  receivedAt: number;
  /** When the exchange ended (answered, or the connection closed); unset while it is open. */
  endedAt?: number;
}

/** The most requests of `requests` that were open at the same moment. */
export function peakConcurrency(requests: readonly ReceivedRequest[]): number {
  // An exchange answered within the millisecond it arrived still lasted a moment.
  const moments = requests.flatMap((request) => [
    { at: request.receivedAt, change: 1 },
    { at: request.endedAt === undefined ? Number.POSITIVE_INFINITY : Math.max(request.endedAt, request.receivedAt + 0.5), change: -1 },
  ]);
  // At the same moment an end comes before a start: back-to-back exchanges do not overlap.
  moments.sort((a, b) => a.at - b.at || a.change - b.change);
  let open = 0;
  let peak = 0;
  for (const moment of moments) {
    open += moment.change;
    peak = Math.max(peak, open);
  }
  return peak;
}

/**
 * What to do with a request: answer with a status (and optional headers), never answer, or close
 * its connection without answering (as a server whose idle limit ran out as the request came).
 */
export type ReceiverBehaviour = (
  request: ReceivedRequest,
  index: number,
) => { status: number; headers?: Record<string, string>; body?: string | Buffer } | 'hang' | 'close';

/** A real HTTPS receiver on a loopback address with a self-signed certificate. */
export interface HttpsReceiver {
  readonly url: string;
  readonly certFile: string;
  readonly requests: ReceivedRequest[];
  /** TLS connections accepted so far (keep-alive reuse keeps this low). */
  readonly connectionCount: number;
  behave(behaviour: ReceiverBehaviour): void;
  /** Answers every request left hanging so far with `status`. */
  answerHanging(status?: number): void;
  /** Resolves once `count` requests have arrived. */
  waitForRequests(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export async function startHttpsReceiver(options: ReceiverOptions = {}): Promise<HttpsReceiver> {
  const host = options.host ?? '127.0.0.1';
  const owned = options.certificate ? undefined : makeSelfSignedCertificate();
  const certificate = options.certificate ?? owned!;
  const requests: ReceivedRequest[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let behaviour: ReceiverBehaviour = () => ({ status: 200 });
  const hanging = new Set<import('node:http').ServerResponse>();

  const server: Server = createServer({ key: certificate.key, cert: certificate.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawBody: Buffer.concat(chunks),
        remoteAddress: req.socket.remoteAddress ?? '',
        receivedAt: Date.now(),
      };
      res.on('close', () => {
        request.endedAt = Date.now();
        hanging.delete(res);
      });
      requests.push(request);
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) waiter.resolve();
      const answer = behaviour(request, requests.length - 1);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      if (answer === 'close') {
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.status, answer.headers).end(answer.body ?? 'ok');
    });
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  let connectionCount = 0;
  server.on('secureConnection', () => {
    connectionCount += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    url: `https://${host}:${port}/hooks`,
    certFile: certificate.certFile,
    requests,
    get connectionCount() {
      return connectionCount;
    },
    behave(next) {
      behaviour = next;
    },
    answerHanging(status = 200) {
      for (const res of [...hanging]) res.writeHead(status).end('ok');
    },
    waitForRequests(count, timeoutMs = 30_000) {
      if (requests.length >= count) return Promise.resolve(requests.slice());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`expected ${count} requests, got ${requests.length} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(requests.slice());
          },
        });
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      owned?.cleanup();
    },
  };
}
