import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Database } from '../db/client.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import type { PublishLanes } from '../events/publish-lanes.ts';
import type { PublishQuota, PublishQuotaLimits } from '../events/quota.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';
import type { Metrics } from '../metrics.ts';
import type { SecretBox } from '../secrets/crypto.ts';

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
  /** What one project may put into the service (the configuration's `admission`). */
  admission: AdmissionLimits;
  logger: Logger;
  metrics: Metrics;
  /** The origin customers reach the service at (PUBLIC_URL), for portal links; the request's origin when unset. */
  publicUrl?: string | undefined;
  /** Tracing is on: each request is served in a span (src/tracing/http-server.ts). */
  tracing?: boolean;
}

/** What one project may put into the service, unless the operator set its own limits (`npm run cli -- limits`). */
export interface AdmissionLimits {
  /** The publish quota (PROJECT_PUBLISH_RATE, PROJECT_PUBLISH_BURST), events and test events alike. */
  publish: PublishQuotaLimits;
  /** Webhooks (PROJECT_MAX_WEBHOOKS). */
  maxWebhooks: number;
  /** Bulk retry operations running at once (BULK_RETRY_MAX_PER_PROJECT). */
  maxBulkRetries: number;
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
    /** The publish quota of every project, kept by the app (its refusals are remembered in this process). */
    quota: PublishQuota;
    /** A few publishes of one project at once in this process, the others in line. */
    publishLanes: PublishLanes;
    logger: Logger;
    /** The authenticated customer API key (set by the v2 auth middleware). */
    apiKey: ApiKeyRow;
    /** The project a producer key publishes for; undefined for the operator's EVENT_PRODUCER_TOKEN. */
    producerProjectId: string | undefined;
    /** The producer's bearer token, for its publish quota's refusals. */
    producerToken: string;
  };
}
