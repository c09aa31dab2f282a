import { Agent, request } from 'node:https';
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates } from 'node:tls';
import { STATUS_CODES } from 'node:http';
import type { AttemptOutcome } from '../db/queries/deliveries.ts';

// The address policy: no request reaches a non-public address, whatever a URL's host resolves to.

const nonPublicNetworks = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  nonPublicNetworks.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['fc00::', 7], // unique local (includes AWS metadata fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
] as const) {
  nonPublicNetworks.addSubnet(network, prefix, 'ipv6');
}

/** IPv4 address embedded in an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::/96) IPv6 address. */
function embeddedIpv4(address: string): string | undefined {
  const match = /^(?:::ffff:|64:ff9b::)(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(address);
  if (!match) return undefined;
  if (match[1]) return match[1];
  const high = Number.parseInt(match[2]!, 16);
  const low = Number.parseInt(match[3]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/**
 * Whether the service may send to `address` (an IP literal): false for loopback,
 * private, link-local, multicast, metadata and other non-public ranges, also when
 * written as an IPv4-mapped IPv6 address. Anything that is not an IP is refused.
 */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !nonPublicNetworks.check(address, 'ipv4');
  if (family !== 6) return false;
  const v4 = embeddedIpv4(address);
  if (v4) return !nonPublicNetworks.check(v4, 'ipv4');
  return !nonPublicNetworks.check(address, 'ipv6');
}

/** At most this much of a response body is read; the rest is cut off. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** One POST to a customer endpoint. */
export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Aborts the exchange (the activity's cancellation). */
  signal?: AbortSignal | undefined;
}

/** How a POST ended. `statusCode` is set whenever the endpoint answered. */
export interface SendResult {
  outcome: AttemptOutcome;
  statusCode?: number | undefined;
  error?: string | undefined;
  durationMs: number;
  /** A 429 or 503 answer's `Retry-After`, in milliseconds from now. */
  retryAfterMs?: number | undefined;
  /** The service cancelled the exchange (a manual retry): its end says nothing about the endpoint. */
  cancelled?: true;
  /** What only the operator's logs may show: for a destination the address policy refused, the addresses it resolved to. */
  operatorDetail?: string | undefined;
}

/**
 * The one reason a customer sees for a destination the address policy refuses, whatever it
 * resolved to: the addresses, and so which internal names exist, go to the operator's logs only.
 */
export const DESTINATION_NOT_ALLOWED = 'destination not allowed';

/** The error of an attempt the service cancelled (a retry reached it, or Temporal had given it to another worker). */
export const CANCELLED_ATTEMPT_ERROR = 'attempt cancelled';

/** Statuses whose `Retry-After` the service follows (back-pressure from the endpoint). */
const BACK_PRESSURE_STATUSES = new Set([429, 503]);

/**
 * How long a kept-alive connection may stay idle before it is closed: shorter than the idle limit
 * of most servers and load balancers (60 s and more), and cut further to a second under the limit
 * a server announces (`Keep-Alive: timeout=5` from Node and Apache), which Node honours only when
 * an agent has an idle limit of its own. Also bounds the idle sockets kept for endpoints sent to
 * once.
 */
const IDLE_CONNECTION_MS = 30_000;

/** Errors of a kept-alive connection the endpoint closed while idle, found as a request goes out on it. */
const STALE_CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE']);

/** {@link exchangeOnce}'s answer when a reused connection turned out closed before any answer came. */
const STALE_CONNECTION = Symbol('stale connection');

/**
 * A `Retry-After` value in milliseconds from `now`: delay-seconds or an HTTP date (RFC 9110
 * 10.2.3); undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** One send's request and limits, for each exchange it makes. */
interface Exchange {
  target: URL;
  headers: Record<string, string>;
  body: string;
  /** The activity's cancellation. */
  signal: AbortSignal | undefined;
  /** The send's time limit, counted once for all its exchanges. */
  timeout: AbortSignal;
  /** Milliseconds since the send began. */
  elapsed: () => number;
}

/** Sends signed notifications over kept-alive HTTPS connections. */
export interface Sender {
  send(request: SendRequest): Promise<SendResult>;
  close(): void;
}

export interface SenderOptions {
  /** Limit for the whole exchange, connect to last byte (spec: 30 s). */
  timeoutMs: number;
  /** Allow loopback and private targets (development and tests only). */
  allowPrivateTargets: boolean;
  /** Extra trusted certificate authorities (PEM), trusted besides the system's. */
  ca?: string | Buffer | undefined;
  /** Name resolution; defaults to the system resolver. Tests map names here without DNS. */
  lookup?: LookupFunction | undefined;
}

class RefusedTargetError extends Error {
  readonly code = 'ERR_TARGET_REFUSED';
}

/**
 * Wraps a resolver so that connections only go to public addresses: the check runs on
 * the addresses the socket will connect to, after resolution, so a DNS name that
 * resolves to a private address is refused too.
 */
function publicOnlyLookup(resolve: LookupFunction): LookupFunction {
  return (hostname, options: LookupOptions, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = (Array.isArray(addresses) ? addresses : [{ address: addresses, family: 4 }]) as LookupAddress[];
      const allowed = list.filter((entry) => isPublicAddress(entry.address));
      if (allowed.length === 0) {
        const names = list.map((entry) => entry.address).join(', ');
        return callback(new RefusedTargetError(`${hostname} resolves to a non-public address (${names})`), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}

function describeNetworkError(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset by the endpoint';
    case 'ENOTFOUND':
      return 'host not found';
    case 'EAI_AGAIN':
      return 'name resolution failed temporarily';
    default:
      return error.code ? `${error.code}: ${error.message}` : error.message;
  }
}

/** Creates a {@link Sender}. */
export function createSender(options: SenderOptions): Sender {
  const resolve = options.lookup ?? (dnsLookup as unknown as LookupFunction);
  const agent = new Agent({
    keepAlive: true,
    timeout: IDLE_CONNECTION_MS,
    // No queue in the agent: every request gets its socket at once, so the time limit counts
    // from the moment the request goes out (connect included), never from time spent queued.
    // What one endpoint may hold is bounded by flow control (src/flow-control/), not here.
    maxSockets: Infinity,
    // A `ca` option replaces Node's trust store, so the extra authorities join the default ones.
    // One secure context for every connection: a plain `ca` option would parse the ~150 root
    // certificates again for each new TLS connection (a third of the send path's throughput).
    ...(options.ca ? { secureContext: createSecureContext({ ca: [...rootCertificates, options.ca.toString()] }) } : {}),
    lookup: options.allowPrivateTargets ? resolve : publicOnlyLookup(resolve),
  });

  async function send({ url, headers, body, signal }: SendRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const target = new URL(url);
    const host = target.hostname.replace(/^\[|\]$/g, '');
    // Node skips the lookup for IP literals, so they are checked here.
    if (!options.allowPrivateTargets && isIP(host) && !isPublicAddress(host)) {
      return { outcome: 'refused', error: DESTINATION_NOT_ALLOWED, operatorDetail: `${host} is not a public address`, durationMs: elapsed() };
    }
    const exchange: Exchange = { target, headers, body, signal, timeout: AbortSignal.timeout(options.timeoutMs), elapsed };
    // A reused connection reset before any answer is almost always one the endpoint closed while
    // idle, its close crossing the request unread: the request goes again, within the same time
    // limit, on another connection (Node's documented `reusedSocket` pattern; were it read, the
    // resend is a duplicate the body's id lets the receiver drop). Each retry spends an idle
    // connection, so it ends on a new one at the latest.
    for (;;) {
      const result = await exchangeOnce(exchange);
      if (result !== STALE_CONNECTION) return result;
    }
  }

  /** One HTTP exchange of {@link send}: its result, or {@link STALE_CONNECTION}. */
  function exchangeOnce({ target, headers, body, signal, timeout, elapsed }: Exchange): Promise<SendResult | typeof STALE_CONNECTION> {
    const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
    return new Promise((settle) => {
      let answered = false;
      const req = request(
        target,
        {
          method: 'POST',
          agent,
          headers: { ...headers, 'Content-Length': Buffer.byteLength(body).toString() },
          signal: abort,
        },
        (res) => {
          answered = true;
          const statusCode = res.statusCode ?? 0;
          let received = 0;
          res.on('data', (chunk: Buffer) => {
            received += chunk.length;
            if (received > MAX_RESPONSE_BYTES) res.destroy();
          });
          const finish = () => {
            if (statusCode >= 200 && statusCode < 300) {
              settle({ outcome: 'succeeded', statusCode, durationMs: elapsed() });
              return;
            }
            const reason = STATUS_CODES[statusCode] ?? 'Unknown';
            const error =
              statusCode >= 300 && statusCode < 400
                ? `HTTP ${statusCode} ${reason} (redirects are not followed)`
                : `HTTP ${statusCode} ${reason}`;
            const retryAfterMs = BACK_PRESSURE_STATUSES.has(statusCode) ? parseRetryAfter(res.headers['retry-after']) : undefined;
            settle({ outcome: 'http_error', statusCode, error, durationMs: elapsed(), ...(retryAfterMs !== undefined && { retryAfterMs }) });
          };
          res.on('end', finish);
          res.on('close', finish); // also when the body was cut off; settle ignores repeats
          res.on('error', () => {});
        },
      );
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (timeout.aborted) {
          settle({ outcome: 'timeout', error: `no response within ${options.timeoutMs} ms`, durationMs: elapsed() });
        } else if (error instanceof RefusedTargetError || error.code === 'ERR_TARGET_REFUSED') {
          settle({ outcome: 'refused', error: DESTINATION_NOT_ALLOWED, operatorDetail: error.message, durationMs: elapsed() });
        } else if (signal?.aborted) {
          settle({ outcome: 'network_error', error: CANCELLED_ATTEMPT_ERROR, durationMs: elapsed(), cancelled: true });
        } else if (req.reusedSocket && !answered && STALE_CONNECTION_CODES.has(error.code ?? '')) {
          settle(STALE_CONNECTION);
        } else {
          settle({ outcome: 'network_error', error: describeNetworkError(error), durationMs: elapsed() });
        }
      });
      req.end(body);
    });
  }

  return { send, close: () => agent.destroy() };
}
