/**
 * Endpoint health: a webhook whose every attempt has failed for `afterMs` (a success resets
 * the clock, `webhooks.failing_since`), with at least `minDeadLetters` deliveries dead-lettered
 * in that time, is disabled by the service, with the reason and the time on the webhook.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../db/client.ts';
import { formatDuration } from '../duration.ts';

/** WEBHOOK_AUTO_DISABLE_AFTER and WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS. */
export interface AutoDisableRule {
  afterMs: number;
  minDeadLetters: number;
}

/** A webhook the rule has just disabled. */
export interface AutoDisabled {
  webhookId: string;
  failingSince: Date;
  deadLetters: number;
  reason: string;
}

/**
 * Applies the rule to the webhook of `deliveryId` (just dead-lettered): disables it, in one
 * statement, if it is active and has failed long enough with enough dead letters. Returns what
 * it disabled, or undefined.
 */
export async function disableIfFailing(db: Database, deliveryId: string, rule: AutoDisableRule, now = new Date()): Promise<AutoDisabled | undefined> {
  const failedFor = formatDuration(rule.afterMs);
  const [row] = await queryRows<{ id: string; failing_since: string | Date; dead_letters: number; disabled_reason: string }>(
    db,
    sql`
      with target as (
        select w.id, w.failing_since,
               (select count(*)::int from deliveries d
                where d.webhook_id = w.id and d.status = 'dead_letter' and d.updated_at >= w.failing_since) as dead_letters
        from webhooks w
        where w.id = (select webhook_id from deliveries where id = ${deliveryId})
          and w.status = 'active' and w.failing_since <= ${new Date(now.getTime() - rule.afterMs).toISOString()}::timestamptz
      )
      update webhooks set
        status = 'disabled',
        disabled_at = ${now.toISOString()}::timestamptz,
        updated_at = ${now.toISOString()}::timestamptz,
        disabled_reason = 'every attempt has failed since ' || to_char(target.failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
          || ' (more than ' || ${failedFor} || '), ' || target.dead_letters || ' deliveries dead-lettered'
      from target
      where webhooks.id = target.id and target.dead_letters >= ${rule.minDeadLetters} and webhooks.status = 'active'
      returning webhooks.id, target.failing_since, target.dead_letters, webhooks.disabled_reason`,
  );
  if (!row) return undefined;
  return { webhookId: row.id, failingSince: new Date(row.failing_since), deadLetters: row.dead_letters, reason: row.disabled_reason };
}
