import { and, asc, desc, eq, exists, inArray, isNull, lt, ne, notExists, sql, type Placeholder, type SQL } from 'drizzle-orm';
import type { Database } from '../client.ts';
import { preparedPerDatabase } from '../prepared.ts';
import {
  deliveries,
  deliveryAttempts,
  events,
  RETRYABLE_DELIVERY_STATUSES,
  webhooks,
  type DeliveryAttemptRow,
  type DeliveryRow,
  type DeliveryStatus,
  type EventRow,
  type WebhookRow,
} from '../schema.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secrets/crypto.ts';
import { openPayload, openWebhookHeaders, openWebhookSigningSecrets } from '../sealing.ts';

/** Filters and cursor of the deliveries list. */
export interface DeliveryListQuery {
  limit: number;
  startingAfter?: string | undefined;
  status?: DeliveryStatus | undefined;
  event?: string | undefined;
}

/** Deliveries of a webhook, newest first, one page at a time. */
export async function listDeliveries(
  db: Database,
  webhookId: string,
  query: DeliveryListQuery,
): Promise<{ rows: DeliveryRow[]; hasMore: boolean }> {
  const rows = await db
    .select()
    .from(deliveries)
    .where(
      and(
        eq(deliveries.webhookId, webhookId),
        query.startingAfter ? lt(deliveries.id, query.startingAfter) : undefined,
        query.status ? eq(deliveries.status, query.status) : undefined,
        query.event ? eq(deliveries.event, query.event) : undefined,
      ),
    )
    .orderBy(desc(deliveries.id))
    .limit(query.limit + 1);
  return { rows: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
}

/** A delivery of the given webhook. */
export async function findDelivery(
  db: Database,
  webhookId: string,
  deliveryId: string,
): Promise<DeliveryRow | undefined> {
  const [row] = await db
    .select()
    .from(deliveries)
    .where(and(eq(deliveries.id, deliveryId), eq(deliveries.webhookId, webhookId)));
  return row;
}

/** The attempts of a delivery, first attempt first. */
export async function listAttempts(db: Database, deliveryId: string): Promise<DeliveryAttemptRow[]> {
  return db
    .select()
    .from(deliveryAttempts)
    .where(eq(deliveryAttempts.deliveryId, deliveryId))
    .orderBy(asc(deliveryAttempts.attemptNumber));
}

/** What a manual retry replaced, so it can be put back if the retry cannot be queued. */
export type RetryableState = Pick<DeliveryRow, 'status' | 'nextRetryAt'>;

/**
 * Moves a `failed` or `dead_letter` delivery back to `pending` for a manual retry.
 * Returns what it replaced, or undefined when the delivery was in no retryable status.
 */
export async function queueManualRetry(db: Database, deliveryId: string): Promise<RetryableState | undefined> {
  // One statement, not a transaction of a locking read and an update: the subquery locks the row
  // and keeps what it held before.
  const previous = db
    .select({ id: deliveries.id, status: deliveries.status, nextRetryAt: deliveries.nextRetryAt })
    .from(deliveries)
    .where(and(eq(deliveries.id, deliveryId), inArray(deliveries.status, RETRYABLE_DELIVERY_STATUSES)))
    .for('update')
    .as('previous');
  const [replaced] = await db
    .update(deliveries)
    .set({ status: 'pending', nextRetryAt: null, updatedAt: new Date() })
    .from(previous)
    .where(eq(deliveries.id, previous.id))
    .returning({ status: previous.status, nextRetryAt: previous.nextRetryAt });
  return replaced;
}

/** Puts back what {@link queueManualRetry} replaced, if the delivery is still `pending`. */
export async function restoreRetryableState(db: Database, deliveryId: string, state: RetryableState): Promise<void> {
  await db
    .update(deliveries)
    .set({ ...state, updatedAt: new Date() })
    .where(and(eq(deliveries.id, deliveryId), eq(deliveries.status, 'pending')));
}

/** The error an attempt row gets when its attempt never reported how it ended. */
export const ABANDONED_ATTEMPT_ERROR = 'the attempt did not report back in time';

/**
 * Closes as timed out the attempt rows of a delivery still `in_progress`: their attempt never
 * reported how it ended (its worker died, or the database was down when it finished).
 */
function closeAbandonedAttempts(db: Database, deliveryId: string | Placeholder, onlyIf?: SQL) {
  return db
    .update(deliveryAttempts)
    .set({ outcome: 'timeout', error: ABANDONED_ATTEMPT_ERROR })
    .where(and(eq(deliveryAttempts.deliveryId, deliveryId), eq(deliveryAttempts.outcome, 'in_progress'), onlyIf));
}

/** A delivery with its webhook and event, as an attempt to send it starts. */
export interface AttemptStart {
  /** The delivery as it was before this attempt. */
  delivery: DeliveryRow;
  webhook: WebhookRow;
  event: EventRow;
  /** The attempt opened; absent when the delivery was already delivered, its webhook is disabled or its event erased. */
  attempt?: AttemptOpened;
}

/** An attempt opened, with what it sends opened from its sealed rows. */
export interface AttemptOpened {
  attemptId: string;
  attemptNumber: number;
  /** The event's data. */
  data: Record<string, unknown>;
  /** The secrets that sign it: the webhook's current one, then the one a rotation replaced while its grace period lasts. */
  secrets: string[];
  /** The webhook's custom headers. */
  customHeaders: Record<string, string>;
}

const startAttemptStatement = preparedPerDatabase((db) => {
  const deliveryId = sql.placeholder('deliveryId');
  const startedAt = sql<Date>`${sql.placeholder('startedAt')}::timestamptz`;
  const activeWebhook = db
    .select({ id: webhooks.id })
    .from(webhooks)
    .where(and(eq(webhooks.id, deliveries.webhookId), eq(webhooks.status, 'active')));
  const unerasedEvent = db
    .select({ id: events.id })
    .from(events)
    .where(and(eq(events.id, deliveries.eventId), isNull(events.erasedAt)));
  // The row this very attempt opened, when a try whose answer was lost committed it.
  const earlier = db.$with('earlier').as(
    db
      .select({
        earlierNumber: sql<number>`${deliveryAttempts.attemptNumber}`.as('earlier_number'),
        earlierOutcome: sql<DeliveryAttemptRow['outcome']>`${deliveryAttempts.outcome}`.as('earlier_outcome'),
      })
      .from(deliveryAttempts)
      .where(and(eq(deliveryAttempts.id, sql.placeholder('attemptId')), eq(deliveryAttempts.deliveryId, deliveryId))),
  );
  const started = db.$with('started').as(
    db
      .update(deliveries)
      .set({ status: 'processing', attemptCount: sql`${deliveries.attemptCount} + 1`, nextRetryAt: null, updatedAt: startedAt })
      .where(
        and(
          eq(deliveries.id, deliveryId),
          ne(deliveries.status, 'delivered'),
          exists(activeWebhook),
          exists(unerasedEvent),
          notExists(db.select().from(earlier)),
        ),
      )
      .returning({ attemptNumber: deliveries.attemptCount }),
  );
  const abandoned = db.$with('abandoned').as(closeAbandonedAttempts(db, deliveryId, exists(db.select().from(started))));
  const opened = db.$with('opened').as(
    db.insert(deliveryAttempts).select((qb) =>
      qb
        .select({
          id: sql<string>`${sql.placeholder('attemptId')}`.as('id'),
          deliveryId: sql<string>`${deliveryId}`.as('delivery_id'),
          attemptNumber: started.attemptNumber,
          startedAt: startedAt.as('started_at'),
          durationMs: sql<null>`null::integer`.as('duration_ms'),
          statusCode: sql<null>`null::integer`.as('status_code'),
          error: sql<null>`null::text`.as('error'),
          outcome: sql<'in_progress'>`'in_progress'`.as('outcome'),
        })
        .from(started),
    ),
  );
  // The main query reads the rows as they were before the statement's own updates.
  return db
    .with(earlier, started, abandoned, opened)
    .select({
      delivery: deliveries,
      webhook: webhooks,
      event: events,
      attemptNumber: started.attemptNumber,
      earlierNumber: earlier.earlierNumber,
      earlierOutcome: earlier.earlierOutcome,
    })
    .from(deliveries)
    .innerJoin(webhooks, eq(webhooks.id, deliveries.webhookId))
    .innerJoin(events, eq(events.id, deliveries.eventId))
    .leftJoin(started, sql`true`)
    .leftJoin(earlier, sql`true`)
    .where(eq(deliveries.id, deliveryId))
    .prepare('start_attempt');
});

/**
 * Starts an attempt, in one statement: unless the delivery is delivered, its webhook
 * disabled or its event's data erased, marks it `processing`, counts the attempt, opens its attempt row and closes as
 * abandoned any row an earlier attempt left open (its worker died, or the database was down
 * when it finished). Returns what the send needs, the sealed payload, secret and headers opened
 * with `box`, or undefined if the delivery is gone.
 *
 * Safe to try again with the same `attemptId` and `startedAt` after an answer lost with its
 * connection: when the first try committed, nothing more is counted or opened, and the attempt it
 * opened is answered. Throws when a newer attempt has closed that row since: this one must not send.
 */
export async function startAttempt(
  db: Database,
  box: SecretBox,
  deliveryId: string,
  startedAt: Date,
  attemptId = newId('attempt', startedAt.getTime()),
): Promise<AttemptStart | undefined> {
  const [row] = await startAttemptStatement(db).execute({ deliveryId, attemptId, startedAt: startedAt.toISOString() });
  if (!row) return undefined;
  const { attemptNumber: openedNumber, earlierNumber, earlierOutcome, ...context } = row;
  if (earlierOutcome !== null && earlierOutcome !== 'in_progress') {
    throw new Error(`attempt ${attemptId} of delivery ${deliveryId} was closed by a newer attempt before it was sent`);
  }
  const attemptNumber = openedNumber ?? earlierNumber;
  if (attemptNumber === null) return context;
  const { event, webhook } = context;
  let opened;
  try {
    opened = { data: openPayload(box, event)!, secrets: openWebhookSigningSecrets(box, webhook, startedAt), customHeaders: openWebhookHeaders(box, webhook) };
  } catch (error) {
    // Nothing can be sent, now or on a retry: the attempt is closed as the service's refusal, not
    // left to time out as if the endpoint had been tried.
    const reason = `not sent: ${(error as Error).message}`;
    await db.update(deliveryAttempts).set({ outcome: 'refused', error: reason, durationMs: 0 }).where(and(eq(deliveryAttempts.id, attemptId), eq(deliveryAttempts.outcome, 'in_progress')));
    throw new SealedDataUnopenableError(`delivery ${deliveryId}: ${reason}`);
  }
  return { ...context, attempt: { attemptId, attemptNumber, ...opened } };
}

/** A delivery's sealed payload, secret or headers did not open when its attempt started: nothing was sent. */
export class SealedDataUnopenableError extends Error {
  override name = 'SealedDataUnopenableError';
}

/** How an attempt ended. */
export type AttemptOutcome = Exclude<DeliveryAttemptRow['outcome'], 'in_progress'>;

/** The result of one attempt, and the status it leaves the delivery in. */
export interface AttemptResult {
  attemptId: string;
  deliveryId: string;
  webhookId: string;
  outcome: AttemptOutcome;
  finishedAt: Date;
  durationMs: number;
  statusCode?: number | undefined;
  error?: string | undefined;
  /** `failed` with the time of the next automatic attempt, or `dead_letter`. Ignored on success. */
  nextStatus: { status: 'failed'; nextRetryAt: Date } | { status: 'dead_letter' };
  /** The service cancelled the attempt (a manual retry): the webhook's failure counters and circuit breaker stay as they are. */
  cancelled?: boolean | undefined;
}

/** What {@link finishAttempt} recorded. */
export interface AttemptRecorded {
  /**
   * False when the attempt was no longer the delivery's current one (a newer attempt, or the end
   * of its round, had closed its row): nothing was written.
   */
  recorded: boolean;
  /** The webhook's circuit breaker changed state with this attempt. */
  circuit?: 'opened' | 'closed' | undefined;
  /**
   * The attempt's row was closed with this very result by an earlier try of the same statement,
   * whose answer was lost with its connection (it committed): recorded, the breaker's change unknown.
   */
  byEarlierTry?: true;
}

/**
 * Closes the attempt row and moves the delivery to `delivered`, `failed` or `dead_letter`,
 * updating the webhook's counters and circuit breaker (open once `breakerThreshold` attempts in
 * a row have failed, or one timed out; closed by a success), in one statement. Fenced: only an attempt whose row is
 * still open writes anything, so the late end of an abandoned attempt changes nothing.
 */
export async function finishAttempt(db: Database, result: AttemptResult, breakerThreshold: number): Promise<AttemptRecorded> {
  const common = {
    attemptId: result.attemptId,
    deliveryId: result.deliveryId,
    webhookId: result.webhookId,
    outcome: result.outcome,
    durationMs: result.durationMs,
    statusCode: result.statusCode ?? null,
    error: result.error ?? null,
    finishedAt: result.finishedAt.toISOString(),
  };
  const [row] =
    result.outcome === 'succeeded'
      ? await finishSucceededStatement(db).execute(common)
      : await finishFailedStatement(db).execute({
          ...common,
          breakerThreshold,
          endpointFailure: !result.cancelled,
          status: result.nextStatus.status,
          nextRetryAt: result.nextStatus.status === 'failed' ? result.nextStatus.nextRetryAt.toISOString() : null,
        });
  if (!row) return (await closedWithResult(db, result)) ? { recorded: true, byEarlierTry: true } : { recorded: false };
  const isOpen = row.circuitOpenedAt !== null;
  return { recorded: true, circuit: isOpen === row.wasOpen ? undefined : isOpen ? 'opened' : 'closed' };
}

/**
 * Whether the attempt's row was closed with `result` itself (outcome, duration, status code and
 * error alike): only {@link finishAttempt} with that result writes those, as what closes
 * abandoned attempts writes its own error. Read only when the fenced statement wrote nothing.
 */
async function closedWithResult(db: Database, result: AttemptResult): Promise<boolean> {
  const [row] = await db
    .select({ outcome: deliveryAttempts.outcome, durationMs: deliveryAttempts.durationMs, statusCode: deliveryAttempts.statusCode, error: deliveryAttempts.error })
    .from(deliveryAttempts)
    .where(eq(deliveryAttempts.id, result.attemptId));
  return (
    row !== undefined &&
    row.outcome === result.outcome &&
    row.durationMs === result.durationMs &&
    row.statusCode === (result.statusCode ?? null) &&
    row.error === (result.error ?? null)
  );
}

/** {@link finishAttempt}'s statement for a success or for a failure, with placeholders for the attempt's values. */
function finishAttemptStatement(db: Database, succeeded: boolean) {
  const value = (name: string) => sql`${sql.placeholder(name)}`;
  const finishedAt = sql<Date>`${value('finishedAt')}::timestamptz`;
  const endpointFailure = sql<boolean>`${value('endpointFailure')}::boolean`;
  const closed = db.$with('closed').as(
    db
      .update(deliveryAttempts)
      .set({ outcome: value('outcome'), durationMs: value('durationMs'), statusCode: value('statusCode'), error: value('error') })
      .where(and(eq(deliveryAttempts.id, value('attemptId')), eq(deliveryAttempts.outcome, 'in_progress')))
      .returning({ id: deliveryAttempts.id }),
  );
  const current = exists(db.select().from(closed));
  const settled = db.$with('settled').as(
    db
      .update(deliveries)
      .set(
        succeeded
          ? { status: 'delivered', deliveredAt: finishedAt, nextRetryAt: null, lastStatusCode: value('statusCode'), updatedAt: finishedAt }
          : {
              status: value('status'),
              nextRetryAt: sql`${value('nextRetryAt')}::timestamptz`,
              lastError: value('error'),
              lastStatusCode: value('statusCode'),
              updatedAt: finishedAt,
            },
      )
      .where(and(eq(deliveries.id, value('deliveryId')), current)),
  );
  const wasOpen = db.$with('was_open').as(
    db.select({ open: sql<boolean>`${webhooks.circuitOpenedAt} is not null`.as('open') }).from(webhooks).where(eq(webhooks.id, value('webhookId'))),
  );
  return db
    .with(closed, settled, wasOpen)
    .update(webhooks)
    .set(
      succeeded
        ? {
            successCount: sql`${webhooks.successCount} + 1`,
            failingSince: null,
            lastDeliveredAt: sql`greatest(${webhooks.lastDeliveredAt}, ${finishedAt})`,
            consecutiveFailures: 0,
            circuitOpenedAt: null,
            // Its deliveries made before now are the endpoint's backlog: paced at the project's recovery rate.
            circuitClosedAt: sql`case when ${webhooks.circuitOpenedAt} is not null then ${finishedAt} else ${webhooks.circuitClosedAt} end`,
          }
        : {
            failureCount: sql`${webhooks.failureCount} + ${endpointFailure}::integer`,
            failingSince: sql`case when ${endpointFailure} then coalesce(${webhooks.failingSince}, ${finishedAt}) else ${webhooks.failingSince} end`,
            consecutiveFailures: sql`${webhooks.consecutiveFailures} + ${endpointFailure}::integer`,
            // A timeout opens it at once: the endpoint held a place for the whole time limit.
            circuitOpenedAt: sql`case when ${endpointFailure} and (${webhooks.consecutiveFailures} + 1 >= ${value('breakerThreshold')}::integer or ${value('outcome')} = 'timeout')
              then coalesce(${webhooks.circuitOpenedAt}, ${finishedAt}) else ${webhooks.circuitOpenedAt} end`,
          },
    )
    .where(and(eq(webhooks.id, value('webhookId')), current))
    .returning({ circuitOpenedAt: webhooks.circuitOpenedAt, wasOpen: sql<boolean>`(select open from ${wasOpen})` })
    .prepare(succeeded ? 'finish_attempt_succeeded' : 'finish_attempt_failed');
}

const finishSucceededStatement = preparedPerDatabase((db) => finishAttemptStatement(db, true));
const finishFailedStatement = preparedPerDatabase((db) => finishAttemptStatement(db, false));

/**
 * Ends a round of attempts in `dead_letter`: used by the workflow after the last attempt,
 * also when that attempt could not record its own outcome (its worker died). Attempt rows
 * left open by such an attempt are closed as timed out. False when the delivery is gone or was
 * delivered meanwhile (nothing changed).
 */
export async function markDeadLetter(db: Database, deliveryId: string, reason?: string): Promise<boolean> {
  // One statement, not a transaction of two: both updates commit together, in one round trip.
  const closed = db.$with('closed').as(closeAbandonedAttempts(db, deliveryId));
  const ended = await db
    .with(closed)
    .update(deliveries)
    .set({
      status: 'dead_letter',
      nextRetryAt: null,
      updatedAt: new Date(),
      ...(reason ? { lastError: reason } : {}),
    })
    .where(and(eq(deliveries.id, deliveryId), ne(deliveries.status, 'delivered')))
    .returning({ id: deliveries.id });
  return ended.length > 0;
}
