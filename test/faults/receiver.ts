/**
 * A customer endpoint as the receivers' guide describes it: real HTTPS on a loopback address
 * (127.0.0.1 unless told; 127.0.0.2 makes it another destination host to the service) with a
 * self-signed certificate, verifies every signature with the receiver library, deduplicates
 * on the delivery id and acknowledges duplicates with 2xx. It can be taken down (the port is
 * closed: connection refused) and brought back on the same port with the same certificate.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loopbackCertificate, type LoopbackHost } from '../../bench/lib/loopback-certificate.ts';
import { verifyWebhook, WebhookVerificationError } from '../../src/receiver/index.ts';

/** A certificate for every loopback address a receiver may bind, in a folder of its own. */
function makeLoopbackCertificate() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'receiver-cert-'));
  return { ...loopbackCertificate(dir, 1), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** What the receiver saw of one delivery id. */
export interface Seen {
  /** Verified requests carrying this delivery id (1 = no duplicate). */
  count: number;
  firstAt: number;
  lastAt: number;
}

export class DedupeReceiver {
  readonly #certificate: ReturnType<typeof makeLoopbackCertificate>;
  /** Whether this receiver made its certificate (and removes it on close). */
  readonly #ownsCertificate: boolean;
  readonly #host: LoopbackHost;

  /**
   * @param sharing another receiver whose certificate this one serves too, so that one
   *   DELIVERY_CA_FILE trusts several endpoints (as one CA would).
   * @param host the loopback address to listen on: two receivers on two addresses are two
   *   destination hosts to the service.
   */
  constructor(sharing?: DedupeReceiver, host: LoopbackHost = '127.0.0.1') {
    this.#certificate = sharing ? sharing.#certificate : makeLoopbackCertificate();
    this.#ownsCertificate = !sharing;
    this.#host = host;
  }
  #server: Server | undefined;
  #sockets = new Set<Socket>();
  #port = 0;
  #secrets: string[] = [];
  /** Verified deliveries by delivery id. */
  readonly seen = new Map<string, Seen>();
  /** Requests refused by verification, by reason. */
  readonly invalid: { code: string; deliveryId: string | undefined }[] = [];
  /**
   * How long the endpoint takes to answer after it has read (and recorded) a request, like a
   * receiver that stores the notification before acknowledging it. A sender that dies in
   * between never sees the 2xx: the classic source of duplicates.
   */
  latencyMs = 0;
  /** Every request that arrived, valid or not. */
  requests = 0;
  /** Requests read and not answered yet, their connection still open. */
  #openRequests = 0;
  /** The most requests open at once. */
  maxOpenRequests = 0;
  /** When each verified request arrived (ms since the epoch), in order. */
  readonly receipts: number[] = [];
  /** Requests of each delivery open at this moment. */
  readonly #openPerDelivery = new Map<string, number>();
  /** Deliveries that had two requests open at once: the service sent one while another was still out. */
  readonly sentTwiceAtOnce = new Set<string>();

  get certFile(): string {
    return this.#certificate.certFile;
  }

  get url(): string {
    if (!this.#port) throw new Error('the receiver has not been started');
    return `https://${this.#host}:${this.#port}/hooks`;
  }

  get up(): boolean {
    return this.#server !== undefined;
  }

  /** The webhook secrets to verify against (set once the webhook exists). */
  trust(secret: string): void {
    this.#secrets.push(secret);
  }

  /** Milliseconds from `since` to the first verified request after it, if any. */
  firstReceiptAfter(since: number): number | undefined {
    const at = this.receipts.find((t) => t >= since);
    return at === undefined ? undefined : at - since;
  }

  get duplicates(): number {
    let total = 0;
    for (const { count } of this.seen.values()) total += count - 1;
    return total;
  }

  /** Starts listening: on a free port the first time, then on the same port again. */
  async start(): Promise<void> {
    if (this.#server) return;
    const server = createServer({ key: this.#certificate.key, cert: this.#certificate.cert }, (req, res) => {
      this.#openRequests += 1;
      this.maxOpenRequests = Math.max(this.maxOpenRequests, this.#openRequests);
      res.once('close', () => {
        this.#openRequests -= 1;
      });
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.requests += 1;
        const rawBody = Buffer.concat(chunks);
        const headerId = req.headers['x-service-delivery-id'];
        const deliveryId = typeof headerId === 'string' ? headerId : undefined;
        try {
          if (this.#secrets.length === 0) throw new WebhookVerificationError('signature_mismatch', 'no secret yet');
          const payload = verifyWebhook({ rawBody, headers: req.headers, secret: this.#secrets });
          if (payload.id !== deliveryId) {
            throw new WebhookVerificationError('invalid_payload', 'body id differs from X-Service-Delivery-ID');
          }
          const now = Date.now();
          this.receipts.push(now);
          const open = (this.#openPerDelivery.get(payload.id) ?? 0) + 1;
          this.#openPerDelivery.set(payload.id, open);
          if (open > 1) this.sentTwiceAtOnce.add(payload.id);
          res.once('close', () => this.#openPerDelivery.set(payload.id, this.#openPerDelivery.get(payload.id)! - 1));
          const known = this.seen.get(payload.id);
          if (known) {
            known.count += 1;
            known.lastAt = now;
          } else {
            this.seen.set(payload.id, { count: 1, firstAt: now, lastAt: now });
          }
          const answer = () => res.writeHead(known ? 200 : 204).end();
          if (this.latencyMs > 0) {
            // A sender that gave up first closed the connection: nothing left to answer.
            const timer = setTimeout(answer, this.latencyMs);
            res.once('close', () => clearTimeout(timer));
          } else {
            answer();
          }
        } catch (error) {
          const code = error instanceof WebhookVerificationError ? error.code : String(error);
          this.invalid.push({ code, deliveryId });
          res.writeHead(400).end(code);
        }
      });
    });
    server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#port, this.#host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    this.#port = typeof address === 'object' && address ? address.port : 0;
    this.#server = server;
  }

  /** Closes the port and drops every open connection (kept-alive ones included). */
  async stop(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    const closed = new Promise((resolve) => server.close(resolve));
    for (const socket of this.#sockets) socket.destroy();
    server.closeAllConnections();
    await closed;
  }

  async close(): Promise<void> {
    await this.stop();
    if (this.#ownsCertificate) this.#certificate.cleanup();
  }
}
