/**
 * The outbox: an event is stored with its deliveries before their workflows are started, and
 * marked dispatched once they are. An API process that stops in between leaves the event
 * undispatched; the repair check starts its workflows.
 */
import type { Database } from '../db/client.ts';
import { listUndispatchedEvents } from '../db/queries/events.ts';
import { dispatchEvent } from '../events/publish.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';

/**
 * How old an undispatched event must be before the check starts its workflows: its publish
 * request starts them within moments, and may still be doing so.
 */
export const UNDISPATCHED_AFTER_MS = 10_000;

/** Events started per batch, and at most this many of one project's, so that one project's many do not hold back another's. */
export const OUTBOX_BATCH = { events: 100, perProject: 10 } as const;

/**
 * Starts the delivery workflows of a batch of events accepted more than `olderThanMs` ago and not
 * yet dispatched (younger ones may still be starting in their publish request). Answers how many,
 * and whether more may be left: the batch was full, or took a project's share, so one project's
 * backlog goes on in the next batch too. Starting is idempotent: a workflow already running or
 * closed is left as it is.
 */
export async function dispatchUndispatchedEvents(
  deps: { db: Database; scheduler: DeliveryScheduler },
  olderThanMs: number,
): Promise<{ dispatched: number; more: boolean }> {
  const pending = await listUndispatchedEvents(deps.db, new Date(Date.now() - olderThanMs), OUTBOX_BATCH.events, OUTBOX_BATCH.perProject);
  const perProject = new Map<string, number>();
  for (const { event, deliveries } of pending) {
    await dispatchEvent(deps, event, deliveries);
    perProject.set(event.projectId, (perProject.get(event.projectId) ?? 0) + 1);
  }
  const more = pending.length === OUTBOX_BATCH.events || [...perProject.values()].some((count) => count === OUTBOX_BATCH.perProject);
  return { dispatched: pending.length, more };
}
