import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Database } from '../db/client.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';
import type { Metrics } from '../metrics.ts';
import type { SecretBox } from '../secrets.ts';

/** What the API needs from the rest of the service. */
export interface AppDeps {
  db: Database;
  temporal: Client;
  scheduler: DeliveryScheduler;
  secretBox: SecretBox;
  /**
   * EVENT_PRODUCER_TOKEN: the operator's token, which the producers' door (`/internal/v1/events`)
   * accepts for every project; undefined (the default): producer keys only.
   */
  producerToken?: string | undefined;
  logger: Logger;
  metrics: Metrics;
  /** The origin customers reach the service at (PUBLIC_URL), for portal links; the request's origin when unset. */
  publicUrl?: string | undefined;
  /** Tracing is on: each request is served in a span (src/tracing/http-server.ts). */
  tracing?: boolean;
}

/** Hono environment shared by every router. */
export interface AppEnv {
  /**
   * What an in-process caller hands to `app.fetch`: the customer portal calls the API as the
   * API key its session acts for. Requests from the network never carry it (the HTTP server
   * passes its own bindings).
   */
  Bindings: { portalApiKey?: ApiKeyRow };
  Variables: {
    requestId: string;
    deps: AppDeps;
    logger: Logger;
    /** The authenticated customer API key (set by the v2 auth middleware). */
    apiKey: ApiKeyRow;
    /** The project a producer key publishes for; undefined for the operator's EVENT_PRODUCER_TOKEN. */
    producerProjectId: string | undefined;
  };
}
