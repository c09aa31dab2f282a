import { sql, type SQL } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull();

/** Customer API keys. Only the SHA-256 of the token's secret part is stored. */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    name: text('name'),
    tokenHash: text('token_hash').notNull(),
    services: text('services').array().notNull(),
    createdAt: createdAt(),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (table) => [index('api_keys_project_idx').on(table.projectId)],
);

/**
 * Webhook configurations (spec 2.1). The signing secret and the custom headers are stored
 * sealed (AES-256-GCM), bound to the webhook's id (src/db/sealing.ts).
 */
export const webhooks = pgTable(
  'webhooks',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    apiKeyId: text('api_key_id')
      .notNull()
      .references(() => apiKeys.id),
    url: text('url').notNull(),
    events: text('events').array().notNull(),
    status: text('status', { enum: ['active', 'disabled'] }).notNull(),
    /** The custom headers, a JSON object sealed (`SecretBox`); null only on rows of an earlier release. */
    headersSealed: text('headers_sealed'),
    /**
     * The custom headers in clear, as releases before sealing stored them; `secrets reseal` seals
     * such rows and clears it. Never written now.
     */
    headersLegacy: jsonb('headers').$type<Record<string, string>>(),
    secretSealed: text('secret_sealed').notNull(),
    /**
     * The secret a rotation with a grace period replaced, sealed as `secret_sealed` was (the
     * value moves over unopened). It signs beside the current one until
     * `previous_secret_expires_at`; the retention sweep erases it after that.
     */
    previousSecretSealed: text('previous_secret_sealed'),
    previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true, mode: 'date' }),
    /** Sends also carry the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`). */
    standardWebhooks: boolean('standard_webhooks').notNull().default(false),
    successCount: integer('success_count').notNull().default(0),
    failureCount: integer('failure_count').notNull().default(0),
    lastDeliveredAt: timestamp('last_delivered_at', { withTimezone: true, mode: 'date' }),
    /** Start of the current run of failed attempts (null after a success): the endpoint-health clock. */
    failingSince: timestamp('failing_since', { withTimezone: true, mode: 'date' }),
    /** Why and when the service disabled the webhook (null when a customer did, or it is active). */
    disabledReason: text('disabled_reason'),
    disabledAt: timestamp('disabled_at', { withTimezone: true, mode: 'date' }),
    /** Deliveries per second at most (`rate_limit`); null: no limit. */
    rateLimit: doublePrecision('rate_limit'),
    /** Rate limit clock: the earliest time the next send may start (a virtual schedule, GCRA). */
    rateNextAt: timestamp('rate_next_at', { withTimezone: true, mode: 'date' }),
    /** Failed attempts in a row (0 after a success): the circuit breaker's count. */
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    /** When the circuit breaker opened (null: closed): while open, one attempt at a time probes the endpoint. */
    circuitOpenedAt: timestamp('circuit_opened_at', { withTimezone: true, mode: 'date' }),
    /**
     * When the circuit breaker last closed (null: never opened). The sends of deliveries made
     * before it are the endpoint's backlog, paced at the project's recovery rate
     * (`recovery_schedules`, PROJECT_RECOVERY_RATE).
     */
    circuitClosedAt: timestamp('circuit_closed_at', { withTimezone: true, mode: 'date' }),
    /**
     * The destination the sends go to: the URL's host and port as the customer wrote them
     * (`host:port`, the host in lower case, 443 when no port is written), computed by the
     * database from `url` (`url_destination()`, migration 0009). Sends to one destination share
     * its places (`DESTINATION_MAX_IN_FLIGHT`).
     */
    destination: text('destination').generatedAlwaysAs((): SQL => sql`url_destination(url)`),
    createdAt: createdAt(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [
    index('webhooks_project_idx').on(table.projectId, table.id),
    // The open breakers /metrics counts at each scrape, without reading every webhook.
    index('webhooks_open_circuit_idx')
      .on(table.circuitOpenedAt)
      .where(sql`${table.circuitOpenedAt} is not null and ${table.status} = 'active'`),
    check('webhooks_status_check', sql`${table.status} in ('active', 'disabled')`),
    check('webhooks_rate_limit_check', sql`${table.rateLimit} is null or ${table.rateLimit} > 0`),
    check(
      'webhooks_previous_secret_check',
      sql`(${table.previousSecretSealed} is null) = (${table.previousSecretExpiresAt} is null)`,
    ),
    // The previous secrets the retention sweep erases, without reading every webhook.
    index('webhooks_previous_secret_expiry_idx')
      .on(table.previousSecretExpiresAt)
      .where(sql`${table.previousSecretExpiresAt} is not null`),
  ],
);

/**
 * Events accepted from producers. Their 6.2 `data` object (personal data from identity
 * documents) is stored sealed, AES-256-GCM under the key ring of SECRET_ENCRYPTION_KEY, bound to
 * the event's id; it is opened only where a notification body is built.
 */
export const events = pgTable(
  'events',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    /** The producer's idempotency key (`id` in the publish body). */
    producerEventId: text('producer_event_id').notNull(),
    event: text('event').notNull(),
    occurredAt: timestamp('occurred_at', { withTimezone: true, mode: 'date' }).notNull(),
    /** The `data` object, sealed (`SecretBox`); null once erased. */
    payloadSealed: text('payload_sealed'),
    /**
     * The `data` object in clear, as releases before sealing stored it; `secrets reseal` seals
     * such rows and clears it. Never written now.
     */
    payloadLegacy: jsonb('payload').$type<Record<string, unknown>>(),
    /** Keyed hash of `data.request_id` (`SecretBox.lookupHash`), to find an event for erasure. */
    requestIdHash: text('request_id_hash'),
    /** When the payload was erased (a data-subject request); the deliveries keep their metadata. */
    erasedAt: timestamp('erased_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    /** Set once every delivery workflow of the event has been started. */
    dispatchedAt: timestamp('dispatched_at', { withTimezone: true, mode: 'date' }),
    /**
     * The W3C `traceparent` of the request that accepted the event (tracing on), so that delivery
     * workflows started later by the repair check join that request's trace.
     */
    traceparent: text('traceparent'),
  },
  (table) => [
    uniqueIndex('events_producer_key_idx').on(table.projectId, table.producerEventId),
    index('events_undispatched_idx')
      .on(table.createdAt)
      .where(sql`${table.dispatchedAt} is null`),
    // The retention sweep's walk over old events (created_at, then id: its cursor).
    index('events_created_idx').on(table.createdAt, table.id),
    index('events_request_id_idx').on(table.projectId, table.requestIdHash),
  ],
);

export const DELIVERY_STATUSES = [
  'pending',
  'processing',
  'delivered',
  'failed',
  'dead_letter',
] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
/** Statuses a delivery can be retried from on request (spec 4.3 rule 3): the API, bulk retries and the portal. */
export const RETRYABLE_DELIVERY_STATUSES = ['failed', 'dead_letter'] as const satisfies readonly DeliveryStatus[];

/** Delivery records (spec 2.2): one per event and subscribed webhook. */
export const deliveries = pgTable(
  'deliveries',
  {
    id: text('id').primaryKey(),
    webhookId: text('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    eventId: text('event_id')
      .notNull()
      .references(() => events.id),
    event: text('event').notNull(),
    status: text('status', { enum: DELIVERY_STATUSES }).notNull(),
    attemptCount: integer('attempt_count').notNull().default(0),
    createdAt: createdAt(),
    deliveredAt: timestamp('delivered_at', { withTimezone: true, mode: 'date' }),
    lastError: text('last_error'),
    lastStatusCode: integer('last_status_code'),
    nextRetryAt: timestamp('next_retry_at', { withTimezone: true, mode: 'date' }),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [
    index('deliveries_webhook_idx').on(table.webhookId, table.id),
    // The deliveries list filtered by status: a rare status deep in a large webhook's history
    // would otherwise be found by walking every delivery of the webhook (docs/performance.md).
    index('deliveries_webhook_status_idx').on(table.webhookId, table.status, table.id),
    // The retention sweep's way to the oldest settled deliveries of each status: the two are past
    // retention at different times, so the sweep walks each apart, never past the rows it keeps.
    index('deliveries_settled_by_status_idx')
      .on(table.status, table.updatedAt)
      .where(sql`${table.status} in ('delivered', 'dead_letter')`),
    // The previous release's sweep walks this one; it goes in a later release (a contract step),
    // once no replica of that release runs.
    index('deliveries_settled_idx')
      .on(table.updatedAt)
      .where(sql`${table.status} in ('delivered', 'dead_letter')`),
    // The repair check's way to deliveries left pending or processing (src/repair/).
    index('deliveries_unsettled_idx')
      .on(table.updatedAt)
      .where(sql`${table.status} in ('pending', 'processing')`),
    uniqueIndex('deliveries_event_webhook_idx').on(table.eventId, table.webhookId),
    check(
      'deliveries_status_check',
      sql`${table.status} in ('pending', 'processing', 'delivered', 'failed', 'dead_letter')`,
    ),
  ],
);

/** One row per attempt to send a delivery. */
export const deliveryAttempts = pgTable(
  'delivery_attempts',
  {
    id: text('id').primaryKey(),
    deliveryId: text('delivery_id')
      .notNull()
      .references(() => deliveries.id, { onDelete: 'cascade' }),
    attemptNumber: integer('attempt_number').notNull(),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }).notNull(),
    durationMs: integer('duration_ms'),
    statusCode: integer('status_code'),
    error: text('error'),
    outcome: text('outcome', {
      enum: ['in_progress', 'succeeded', 'http_error', 'timeout', 'network_error', 'refused'],
    }).notNull(),
  },
  (table) => [
    uniqueIndex('delivery_attempts_number_idx').on(table.deliveryId, table.attemptNumber),
  ],
);

/**
 * The table of the per-endpoint places of the previous release (one row per delivery holding or
 * waiting for a place, changed by the functions of migration 0005). No code of this release reads
 * or writes it: it is kept, with those functions, for replicas of the previous release that still
 * run during a rolling upgrade, and dropped by a later release.
 */
export const sendPermits = pgTable(
  'send_permits',
  {
    deliveryId: text('delivery_id')
      .primaryKey()
      .references(() => deliveries.id, { onDelete: 'cascade' }),
    webhookId: text('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    state: text('state', { enum: ['held', 'waiting'] }).notNull(),
    queuedAt: timestamp('queued_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    notBefore: timestamp('not_before', { withTimezone: true, mode: 'date' }),
  },
  (table) => [
    index('send_permits_webhook_idx').on(table.webhookId, table.state, table.queuedAt),
    check('send_permits_state_check', sql`${table.state} in ('held', 'waiting')`),
  ],
);

/** The levels at which sends are counted: each send holds one place of each. */
export const SEND_SCOPE_LEVELS = ['webhook', 'project', 'destination'] as const;
export type SendScopeLevel = (typeof SEND_SCOPE_LEVELS)[number];

/**
 * Send capacity (src/flow-control/): the places of every webhook, project and destination, one
 * row a place (`scope` is `w:<webhook id>`, `p:<project id>` or `d:<host:port>`). A send holds
 * one place of each of its three scopes while it is in flight, across every worker replica. A
 * row is taken with `FOR UPDATE SKIP LOCKED`, so requests for places never wait on one another's
 * locks, and no row is a count that every request must update. Rows are made on first use, up to
 * the scope's limit; changed only by the functions of migration 0011.
 */
export const sendPlaces = pgTable(
  'send_places',
  {
    scope: text('scope').notNull(),
    slot: integer('slot').notNull(),
    /** The delivery holding it; null: free. */
    deliveryId: text('delivery_id').references(() => deliveries.id, { onDelete: 'set null' }),
    /**
     * The send attempt holding it (`<workflow run>/<activity>/<attempt>`): a later attempt of the
     * same delivery waits until this hold ends or lapses. Null while the place is only reserved
     * (for a start time under the webhook's rate limit), when no request can be in flight.
     */
    attempt: text('attempt'),
    /**
     * The place is free once this time has passed: `-infinity` when free, the end of the hold
     * while held (a hold past it belongs to an attempt whose worker died, and whose request cannot
     * still be running). One range of an index finds a scope's free places, lowest slot first.
     */
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'string' }).notNull().default(sql`'-infinity'`),
    /** Reserved under a rate limit: the send may start at this time, not before. */
    notBefore: timestamp('not_before', { withTimezone: true, mode: 'date' }),
    /**
     * When a delivery last took it, kept once given back: the latest of a webhook's places is
     * when the webhook was last served, and the head of its line waits its turn from then.
     */
    takenAt: timestamp('taken_at', { withTimezone: true, mode: 'date' }),
  },
  (table) => [
    primaryKey({ columns: [table.scope, table.slot] }),
    index('send_places_free_idx').on(table.scope, table.expiresAt, table.slot),
    index('send_places_delivery_idx').on(table.deliveryId).where(sql`${table.deliveryId} is not null`),
  ],
);

/**
 * Deliveries waiting for a place, in line: first come first served within a webhook (`seq`),
 * and, for the head of a webhook's line that waits on its project's or destination's places, in
 * the order it began to wait there (`blocked_since`), so that the webhooks sharing a project or
 * a destination take turns. A waiting delivery's workflow waits for the `sendTurn` signal.
 */
export const sendWaiters = pgTable(
  'send_waiters',
  {
    deliveryId: text('delivery_id')
      .primaryKey()
      .references(() => deliveries.id, { onDelete: 'cascade' }),
    webhookId: text('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull(),
    destination: text('destination').notNull(),
    /** Place in its webhook's line. */
    seq: bigint('seq', { mode: 'number' }).generatedAlwaysAsIdentity(),
    /** Which places it waits for: its webhook's, its project's or its destination's. */
    blocked: text('blocked', { enum: SEND_SCOPE_LEVELS }).notNull(),
    /**
     * Since when it waits at that level. The head of a webhook's line waits its turn from the
     * later of this and the webhook's last service (`send_places.taken_at`).
     */
    blockedSince: timestamp('blocked_since', { withTimezone: true, mode: 'date' }).notNull(),
    /** Woken (its workflow signalled) and expected to ask again before this time. */
    wokenUntil: timestamp('woken_until', { withTimezone: true, mode: 'date' }),
  },
  (table) => [
    index('send_waiters_webhook_line_idx').on(table.webhookId, table.seq),
    index('send_waiters_project_line_idx').on(table.projectId, table.blockedSince).where(sql`${table.blocked} = 'project'`),
    index('send_waiters_destination_line_idx').on(table.destination, table.blockedSince).where(sql`${table.blocked} = 'destination'`),
    check('send_waiters_blocked_check', sql`${table.blocked} in ('webhook', 'project', 'destination')`),
  ],
);

/** Limits the operator set for one project (`npm run cli -- limits`), over the configuration's defaults. A project cannot change them. */
export const projectLimits = pgTable(
  'project_limits',
  {
    projectId: text('project_id').primaryKey(),
    /** Sends in flight of the project's webhooks at most; null: PROJECT_MAX_IN_FLIGHT. */
    maxInFlight: integer('max_in_flight'),
    /** Events per second the project may publish; null: PROJECT_PUBLISH_RATE. */
    publishRate: doublePrecision('publish_rate'),
    /** Events the project may publish at once above its rate; null: PROJECT_PUBLISH_BURST. */
    publishBurst: integer('publish_burst'),
    /** Webhooks the project may have; null: PROJECT_MAX_WEBHOOKS. */
    maxWebhooks: integer('max_webhooks'),
    /** Sends per second of its endpoints' backlogs once their breakers close; 0: not paced; null: PROJECT_RECOVERY_RATE. */
    recoveryRate: doublePrecision('recovery_rate'),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [
    check('project_limits_max_in_flight_check', sql`${table.maxInFlight} is null or ${table.maxInFlight} between 1 and 100000`),
    check('project_limits_publish_rate_check', sql`${table.publishRate} is null or (${table.publishRate} >= 0.01 and ${table.publishRate} <= 100000)`),
    check('project_limits_publish_burst_check', sql`${table.publishBurst} is null or ${table.publishBurst} between 1 and 1000000`),
    check('project_limits_max_webhooks_check', sql`${table.maxWebhooks} is null or ${table.maxWebhooks} between 1 and 1000000`),
    check('project_limits_recovery_rate_check', sql`${table.recoveryRate} is null or ${table.recoveryRate} = 0 or (${table.recoveryRate} >= 0.1 and ${table.recoveryRate} <= 1000)`),
  ],
);

/**
 * The publish quota of each project that has published (`take_publish_token`, migration 0013):
 * the theoretical arrival time of its next event under the generic cell rate algorithm. A
 * request that finds it more than the burst ahead of now is refused; an accepted one moves it on
 * by 1 / rate. One row a project: only that project's requests ever wait on it.
 */
export const publishQuotas = pgTable('publish_quotas', {
  projectId: text('project_id').primaryKey(),
  nextAt: timestamp('next_at', { withTimezone: true, mode: 'date' }).notNull(),
});

/**
 * The recovery schedule of each project whose endpoint recovered (`acquire_send_places`,
 * migration 0025): the earliest time its next backlog send may start. A send of a delivery made
 * before its webhook's circuit breaker last closed takes the next start, 1 / PROJECT_RECOVERY_RATE
 * after the previous one, so an outage's backlog goes out at that pace across the project's
 * webhooks.
 */
export const recoverySchedules = pgTable('recovery_schedules', {
  projectId: text('project_id').primaryKey(),
  nextAt: timestamp('next_at', { withTimezone: true, mode: 'date' }).notNull(),
});

/** Limits the operator set for one destination (`host:port`), over the configuration's defaults. */
export const destinationLimits = pgTable(
  'destination_limits',
  {
    destination: text('destination').primaryKey(),
    /** Sends in flight to the destination at most; null: DESTINATION_MAX_IN_FLIGHT. */
    maxInFlight: integer('max_in_flight'),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [check('destination_limits_max_in_flight_check', sql`${table.maxInFlight} is null or ${table.maxInFlight} between 1 and 100000`)],
);

export const OPERATION_STATUSES = ['running', 'completed', 'cancelled', 'failed'] as const;
export type OperationStatus = (typeof OPERATION_STATUSES)[number];

/**
 * Bulk retry operations (`POST /webhooks/{id}/deliveries/retry`): what they match, and their
 * progress, which the operation's workflow writes page by page.
 */
export const operations = pgTable(
  'operations',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    webhookId: text('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    /** Delivery statuses it retries. */
    statuses: text('statuses', { enum: DELIVERY_STATUSES }).array().notNull(),
    /** Deliveries created from `since` (inclusive) to `until` (exclusive); `until` is at most the operation's creation. */
    since: timestamp('since', { withTimezone: true, mode: 'date' }),
    until: timestamp('until', { withTimezone: true, mode: 'date' }).notNull(),
    status: text('status', { enum: OPERATION_STATUSES }).notNull(),
    /** The last delivery (in id order) its workflow has looked at to match: it selects in pages, after this one. */
    selectionCursor: text('selection_cursor'),
    /**
     * Every matching delivery has been selected into `operation_deliveries`. An operation is
     * created with false; rows of releases that matched everything at creation have true.
     */
    selectionComplete: boolean('selection_complete').notNull().default(true),
    createdAt: createdAt(),
    finishedAt: timestamp('finished_at', { withTimezone: true, mode: 'date' }),
    /**
     * Its counts as it ended, kept on the row: the retention sweep later deletes the deliveries
     * it matched, and their `operation_deliveries` rows with them. Null while it runs (and on
     * operations that ended before these columns existed).
     */
    matchedCount: integer('matched_count'),
    retriedCount: integer('retried_count'),
    skippedCount: integer('skipped_count'),
  },
  (table) => [
    index('operations_webhook_idx').on(table.webhookId, table.id),
    // The running operations of a project, looked at when one is created (at most one per webhook, a bounded number per project).
    index('operations_running_idx').on(table.projectId, table.webhookId).where(sql`${table.status} = 'running'`),
    check('operations_status_check', sql`${table.status} in ('running', 'completed', 'cancelled', 'failed')`),
  ],
);

/**
 * The deliveries an operation matched when it was created, and how far each got: `matched`,
 * then `queued` (moved back to `pending` and about to be signalled), then `retried`; or
 * `skipped` when it had moved on by itself before the operation reached it. The counts of an
 * operation are counts of these rows, so they are exact whatever crashed in between.
 */
export const operationDeliveries = pgTable(
  'operation_deliveries',
  {
    operationId: text('operation_id')
      .notNull()
      .references(() => operations.id, { onDelete: 'cascade' }),
    deliveryId: text('delivery_id')
      .notNull()
      .references(() => deliveries.id, { onDelete: 'cascade' }),
    state: text('state', { enum: ['matched', 'queued', 'retried', 'skipped'] }).notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.operationId, table.deliveryId] }),
    index('operation_deliveries_delivery_idx').on(table.deliveryId),
    // A step reads the next deliveries of one state in id order: only those, however many the operation handled before.
    index('operation_deliveries_state_idx').on(table.operationId, table.state, table.deliveryId),
  ],
);

/**
 * Customer portal sessions. A session starts as a one-time link minted for an API key's
 * project and becomes a browser session when the link is opened. Only SHA-256 hashes of the
 * link's and the cookie's secrets are stored.
 */
export const portalSessions = pgTable(
  'portal_sessions',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    /** The key the session acts as: the portal calls the API with its rights, and ends when it is revoked. */
    apiKeyId: text('api_key_id')
      .notNull()
      .references(() => apiKeys.id, { onDelete: 'cascade' }),
    linkHash: text('link_hash').notNull(),
    linkExpiresAt: timestamp('link_expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    /** When the link was opened (null: not yet); a link opens once. */
    redeemedAt: timestamp('redeemed_at', { withTimezone: true, mode: 'date' }),
    sessionHash: text('session_hash'),
    /** End of the browser session: the link's expiry until it is opened, then its opening plus the session length. */
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    /** Signed out (null: not signed out). */
    endedAt: timestamp('ended_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
  },
  (table) => [index('portal_sessions_project_expires_idx').on(table.projectId, table.expiresAt)],
);

/**
 * Signing secrets a portal session's changes made (an endpoint added, a secret rotated), each
 * waiting for the one page that shows it: the change answers with a redirect, so a reload of that
 * page neither repeats the change nor shows the secret again. One per session and webhook, sealed
 * and bound to the session; deleted when shown, and with the session.
 */
export const portalSecretReveals = pgTable(
  'portal_secret_reveals',
  {
    sessionId: text('session_id')
      .notNull()
      .references(() => portalSessions.id, { onDelete: 'cascade' }),
    webhookId: text('webhook_id').notNull(),
    secretSealed: text('secret_sealed').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (table) => [primaryKey({ columns: [table.sessionId, table.webhookId] })],
);

export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type PortalSessionRow = typeof portalSessions.$inferSelect;
export type OperationRow = typeof operations.$inferSelect;
export type WebhookRow = typeof webhooks.$inferSelect;
export type EventRow = typeof events.$inferSelect;
export type DeliveryRow = typeof deliveries.$inferSelect;
export type DeliveryAttemptRow = typeof deliveryAttempts.$inferSelect;
