import { serve, type ServerType } from '@hono/node-server';

/** Limits that keep a slow or huge client from tying up the API. */
export interface HttpServerLimits {
  /** Largest request head (request line and headers). */
  maxHeaderBytes: number;
  /** Time allowed to receive the request head. */
  headersTimeoutMs: number;
  /** Time allowed to receive the whole request. */
  requestTimeoutMs: number;
  /** How long an idle kept-alive connection stays open. */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpServerLimits = {
  maxHeaderBytes: 16 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/**
 * Serves `fetch` (a Hono app's) on `host:port` with {@link HttpServerLimits}; request bodies
 * are limited by the app itself (1 MiB). Resolves once listening.
 */
export function startHttpServer(
  fetch: (request: Request) => Response | Promise<Response>,
  options: { port: number; host: string; limits?: Partial<HttpServerLimits> },
): Promise<ServerType> {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...options.limits };
  return new Promise((resolve, reject) => {
    const server = serve(
      {
        fetch,
        port: options.port,
        hostname: options.host,
        serverOptions: {
          maxHeaderSize: limits.maxHeaderBytes,
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          // Node enforces the two timeouts above only at this interval (30 s by default).
          connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
        },
      },
      () => resolve(server),
    );
    server.once('error', reject);
  });
}
