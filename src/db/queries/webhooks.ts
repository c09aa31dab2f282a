import { and, asc, eq, gt, ne, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { queryRows, type Database } from '../client.ts';
import { deliveries, webhooks, type WebhookRow } from '../schema.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secrets/crypto.ts';
import { resealedWebhook, sealWebhookHeaders, sealWebhookSecret, UnopenableWebhookError } from '../sealing.ts';

/** Fields a customer sets on a webhook. */
export interface WebhookInput {
  apiKeyId: string;
  url: string;
  events: string[];
  headers: Record<string, string>;
  /** Deliveries per second at most; undefined or null: no limit. */
  rateLimit?: number | null | undefined;
  /** Sends also carry the Standard Webhooks headers; undefined: false. */
  standardWebhooks?: boolean | undefined;
}

/** Inserts a new, active webhook; its signing secret and headers are sealed to its id. */
export async function insertWebhook(
  db: Database,
  box: SecretBox,
  projectId: string,
  input: WebhookInput & { secret: string },
): Promise<WebhookRow> {
  const now = new Date();
  const id = newId('webhook', now.getTime());
  const [row] = await db
    .insert(webhooks)
    .values({
      id,
      projectId,
      apiKeyId: input.apiKeyId,
      url: input.url,
      events: input.events,
      headersSealed: sealWebhookHeaders(box, id, input.headers),
      rateLimit: input.rateLimit ?? null,
      standardWebhooks: input.standardWebhooks ?? false,
      status: 'active',
      secretSealed: sealWebhookSecret(box, id, input.secret),
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return row!;
}

/**
 * Inserts a new webhook of a project unless the project has reached its limit of webhooks (the
 * operator's `project_limits.max_webhooks`, else `defaultMax`). The count and the insert run
 * under a lock of the project's (a transaction-scoped advisory lock), so requests arriving
 * together cannot pass the limit; other projects never wait on it.
 */
export async function insertWebhookWithinLimit(
  db: Database,
  box: SecretBox,
  projectId: string,
  input: WebhookInput & { secret: string },
  defaultMax: number,
): Promise<{ webhook: WebhookRow } | { limit: number }> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`webhooks:${projectId}`}, 0))`);
    // A statement of its own after the lock: it sees what the requests before it committed.
    const [row] = await queryRows<{ count: number; limit: number }>(
      tx,
      sql`select (select count(*)::int from webhooks where project_id = ${projectId}) as count,
                 coalesce((select max_webhooks from project_limits where project_id = ${projectId}), ${defaultMax}::int) as limit`,
    );
    if (row!.count >= row!.limit) return { limit: row!.limit };
    return { webhook: await insertWebhook(tx, box, projectId, input) };
  });
}

/** A page of a project's webhooks, oldest first, after the webhook `startingAfter`. */
export async function listWebhooks(
  db: Database,
  projectId: string,
  page: { limit: number; startingAfter?: string | undefined },
): Promise<{ rows: WebhookRow[]; hasMore: boolean }> {
  const rows = await db
    .select()
    .from(webhooks)
    .where(and(eq(webhooks.projectId, projectId), page.startingAfter ? gt(webhooks.id, page.startingAfter) : undefined))
    .orderBy(asc(webhooks.id))
    .limit(page.limit + 1);
  return { rows: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
}

/** A webhook by id, whatever its project. */
export async function findWebhook(db: Database, id: string): Promise<WebhookRow | undefined> {
  const [row] = await db.select().from(webhooks).where(eq(webhooks.id, id));
  return row;
}

/** What an update may change; new `headers` are sealed to the webhook. */
export type WebhookChanges = Partial<Pick<WebhookRow, 'url' | 'events' | 'status' | 'rateLimit' | 'standardWebhooks'> & { headers: Record<string, string> }>;

/** A webhook after an update, and the deliveries whose start a new rate limit brought forward (their workflows must be woken). */
export interface UpdatedWebhook {
  row: WebhookRow;
  startsBroughtForward: string[];
}

/**
 * Applies a partial update and bumps `updated_at`. A new `rateLimit`
 * (or none) applies at once, in the same transaction: the rate schedule restarts from now, and the
 * sends already given a start under the old limit are spaced again by the new one, in the order
 * they had. The limit it already has (the portal's form sends it with every save) changes nothing
 * of the schedule.
 */
export async function updateWebhook(db: Database, box: SecretBox, id: string, changes: WebhookChanges): Promise<UpdatedWebhook | undefined> {
  const { headers, ...fields } = changes;
  // Re-enabling a disabled webhook clears the service's reason and restarts the endpoint-health
  // clock; `active` sent for one already active (the portal's form always sends it) changes neither.
  const whenWasDisabled = <T>(column: AnyPgColumn) => sql<T>`case when ${webhooks.status} = 'disabled' then null else ${column} end`;
  const reenabled =
    changes.status === 'active'
      ? { disabledReason: whenWasDisabled<string | null>(webhooks.disabledReason), disabledAt: whenWasDisabled<Date | null>(webhooks.disabledAt), failingSince: whenWasDisabled<Date | null>(webhooks.failingSince) }
      : {};
  const sealed = headers !== undefined && { headersSealed: sealWebhookHeaders(box, id, headers), headersLegacy: null };
  const rateGiven = changes.rateLimit !== undefined;
  const update = async (tx: Database) => {
    let rateChanged = rateGiven;
    if (rateGiven) {
      // The waiting sends' places before the webhook's row: a request for places locks a
      // delivery's places and then moves the webhook's rate schedule, so taken the other way
      // round the two could each wait for the other.
      await queryRows(tx, waitingStartsPlaces(id));
      const [current] = await tx.select({ rateLimit: webhooks.rateLimit }).from(webhooks).where(eq(webhooks.id, id)).for('update');
      rateChanged = current !== undefined && current.rateLimit !== changes.rateLimit;
    }
    const [row] = await tx
      .update(webhooks)
      .set({ ...fields, ...sealed, ...reenabled, ...(rateChanged && { rateNextAt: null }), updatedAt: new Date() })
      .where(eq(webhooks.id, id))
      .returning();
    if (!row) return undefined;
    const startsBroughtForward = rateChanged ? await respaceRateStarts(tx, id, row.rateLimit) : [];
    return { row, startsBroughtForward };
  };
  return rateGiven ? db.transaction(update) : update(db);
}

/**
 * Replaces the signing secret, in one statement, so every later send, pending retries included,
 * is signed with `secret`. With `gracePeriodSeconds`, the secret it replaces keeps signing beside
 * it until then (its sealed value moves over unopened); without, or when the period is 0, it
 * signs nothing more. Either way an older previous secret, from a rotation before, is dropped:
 * at most the current secret and the one it replaced sign a send.
 */
export async function rotateWebhookSecret(
  db: Database,
  box: SecretBox,
  id: string,
  rotation: { secret: string; gracePeriodSeconds?: number | undefined; at: Date },
): Promise<WebhookRow | undefined> {
  const grace = rotation.gracePeriodSeconds ?? 0;
  const keepsPrevious = grace > 0;
  const [row] = await db
    .update(webhooks)
    .set({
      secretSealed: sealWebhookSecret(box, id, rotation.secret),
      previousSecretSealed: keepsPrevious ? sql`${webhooks.secretSealed}` : null,
      previousSecretExpiresAt: keepsPrevious ? new Date(rotation.at.getTime() + grace * 1000) : null,
      updatedAt: rotation.at,
    })
    .where(eq(webhooks.id, id))
    .returning();
  return row;
}

/**
 * Erases up to `batchSize` previous secrets whose grace period ended before `now` (the
 * retention sweep's step); answers how many.
 */
export async function eraseExpiredPreviousSecrets(db: Database, now: Date, batchSize: number): Promise<number> {
  const erased = await queryRows<{ id: string }>(
    db,
    sql`
      with expired as (
        select id from webhooks
        where previous_secret_expires_at is not null and previous_secret_expires_at <= ${now.toISOString()}::timestamptz
        limit ${batchSize}
        for update skip locked
      )
      update webhooks set previous_secret_sealed = null, previous_secret_expires_at = null
      from expired where webhooks.id = expired.id
      returning webhooks.id`,
  );
  return erased.length;
}

/**
 * Locks the places of the webhook's sends that wait for a start time, in the order every call
 * takes places (send_place_order, migration 0024), so that a give-back of one of those
 * deliveries and a move of their starts never wait for each other.
 */
const waitingStartsPlaces = (webhookId: string) => sql`
  select p.scope, p.slot from send_places p
  where p.delivery_id in (select delivery_id from send_places where scope = ${`w:${webhookId}`} and attempt is null and not_before > now())
    and p.not_before is not null
  order by send_place_order(p.scope), p.scope, p.slot
  for update`;

/**
 * Gives the webhook's sends that wait for a start time (their places kept, no attempt yet) new
 * starts under `rateLimit`: the first now, each next 1 / rateLimit s later (all now without a
 * limit), their order kept; the schedule's next start follows the last. Answers the deliveries
 * whose start came earlier: they sleep until the old one unless woken.
 */
async function respaceRateStarts(tx: Database, webhookId: string, rateLimit: number | null): Promise<string[]> {
  const spacingSeconds = rateLimit === null ? 0 : 1 / rateLimit;
  const rows = await queryRows<{ delivery_id: string; earlier: boolean }>(
    tx,
    sql`with waiting as (
          select delivery_id, min(not_before) as old_start,
                 now() + make_interval(secs => (row_number() over (order by min(not_before)) - 1) * ${spacingSeconds}::float8) as new_start
          from send_places
          where scope = ${`w:${webhookId}`} and attempt is null and not_before > now()
          group by delivery_id
        ), locked as (
          -- The caller locked these before the webhook's row; again for any that began waiting since.
          ${waitingStartsPlaces(webhookId)}
        ), moved as (
          update send_places p set not_before = w.new_start, expires_at = w.new_start + (p.expires_at - p.not_before)
          from locked l, waiting w
          where (p.scope, p.slot) = (l.scope, l.slot) and p.delivery_id = w.delivery_id
          returning p.delivery_id
        ), schedule as (
          update webhooks set rate_next_at = (select max(new_start) from waiting) + make_interval(secs => ${spacingSeconds}::float8)
          where id = ${webhookId} and ${rateLimit}::float8 is not null and exists (select 1 from waiting)
        )
        select distinct m.delivery_id, w.new_start < w.old_start as earlier from moved m join waiting w using (delivery_id)`,
  );
  return rows.filter((row) => row.earlier).map((row) => row.delivery_id);
}

async function hasDeliveries(db: Database, webhookId: string): Promise<boolean> {
  const [row] = await queryRows<{ found: boolean }>(db, sql`select exists (select 1 from deliveries where webhook_id = ${webhookId}) as found`);
  return row!.found;
}

/** Deliveries of a webhook being deleted that one statement deletes, with their attempts. */
export const WEBHOOK_DELETE_BATCH = 2_000;

/**
 * Deletes a webhook with its deliveries and attempts; true when this call deleted the webhook's
 * row. Its deliveries go first, `WEBHOOK_DELETE_BATCH` a statement: however long its history, no
 * statement outlasts DATABASE_STATEMENT_TIMEOUT, and the webhook's row, which publishing to it
 * locks, is held only by the last transaction, which deletes what came in meanwhile. Each
 * statement, once committed, hands `onDeleted` (awaited) the ids of its deliveries that were not
 * yet delivered, whose workflows the caller cancels: those of a delete that fails part way, or
 * that another delete of the same webhook finishes first, are cancelled too. A delete stopped
 * part way has deleted history only: asked again, it goes on.
 */
export async function deleteWebhook(db: Database, id: string, onDeleted: (notDelivered: string[]) => void | Promise<void>): Promise<boolean> {
  for (;;) {
    const batch = await queryRows<{ id: string; status: string }>(
      db,
      sql`delete from deliveries where id in (select id from deliveries where webhook_id = ${id} limit ${WEBHOOK_DELETE_BATCH}) returning id, status`,
    );
    await onDeleted(batch.filter((row) => row.status !== 'delivered').map((row) => row.id));
    // A short batch is not the end when another delete of the webhook, or the retention sweep,
    // deleted some of the rows it chose while it waited for them: the rest would go in one statement.
    if (batch.length < WEBHOOK_DELETE_BATCH && !(await hasDeliveries(db, id))) break;
  }
  const { removed, open } = await db.transaction(async (tx) => {
    // Its own send places go with it, before its row and in the order every request for places
    // takes them: such a request, and a change of its rate limit, lock places and then the
    // webhook's row, so taken the other way round the two could each wait for the other. Those of
    // its project and destination that its sends in flight hold stay held until their holds
    // lapse: the bounds stay true meanwhile.
    await queryRows(
      tx,
      sql`delete from send_places where (scope, slot) in (select scope, slot from send_places where scope = ${`w:${id}`} order by slot for update)`,
    );
    const open = await tx
      .select({ id: deliveries.id })
      .from(deliveries)
      .where(and(eq(deliveries.webhookId, id), ne(deliveries.status, 'delivered')));
    const removed = await tx.delete(webhooks).where(eq(webhooks.id, id)).returning({ id: webhooks.id });
    return { removed: removed.length > 0, open: open.map((row) => row.id) };
  });
  await onDeleted(open);
  return removed;
}

/** What {@link resealWebhookSecrets} did. */
export interface WebhookReseal {
  /** Webhooks whose secret and headers were sealed anew. */
  resealed: number;
  /** Webhooks whose secret or headers do not open (sealed for another row, or altered), left as they are. */
  unopenable: string[];
}

/**
 * Seals anew, under the box's current key and bound to the webhook's id, every webhook secret
 * and every set of custom headers that is not yet: sealed with an older key (after
 * SECRET_ENCRYPTION_KEY was rotated), sealed unbound, or stored in clear by an earlier
 * release; a previous secret whose grace period has ended is erased instead. The webhooks are
 * read `batchSize` at a time. Each row is locked while it is resealed, so a concurrent update is
 * never overwritten. A row that does not open is left as it is and reported.
 */
export async function resealWebhookSecrets(db: Database, box: SecretBox, batchSize = 500): Promise<WebhookReseal> {
  const sealedColumns = {
    id: webhooks.id,
    secretSealed: webhooks.secretSealed,
    headersSealed: webhooks.headersSealed,
    headersLegacy: webhooks.headersLegacy,
    previousSecretSealed: webhooks.previousSecretSealed,
    previousSecretExpiresAt: webhooks.previousSecretExpiresAt,
  };
  const result: WebhookReseal = { resealed: 0, unopenable: [] };
  for (let after = ''; ; ) {
    const rows = await db.select(sealedColumns).from(webhooks).where(gt(webhooks.id, after)).orderBy(asc(webhooks.id)).limit(batchSize);
    for (const row of rows) {
      try {
        if (!resealedWebhook(box, row, new Date())) continue;
        result.resealed += await db.transaction(async (tx) => {
          const [current] = await tx.select(sealedColumns).from(webhooks).where(eq(webhooks.id, row.id)).for('update');
          const changes = current && resealedWebhook(box, current, new Date());
          if (!changes) return 0;
          await tx.update(webhooks).set(changes).where(eq(webhooks.id, row.id));
          return 1;
        });
      } catch (error) {
        if (!(error instanceof UnopenableWebhookError)) throw error;
        result.unopenable.push(row.id);
      }
    }
    if (rows.length < batchSize) return result;
    after = rows.at(-1)!.id;
  }
}
