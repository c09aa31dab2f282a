import type { Database } from '../db/client.ts';
import { markEventDispatched, recordEvent, WebhookNotDeliverableError, type DeliveryTarget } from '../db/queries/events.ts';
import type { EventRow } from '../db/schema.ts';
import type { SecretBox } from '../secrets/crypto.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';
import { SpanAttributes } from '../tracing/attributes.ts';
import { currentTraceparent, withTraceparent } from '../tracing/context.ts';
import { annotateActiveSpan } from '../tracing/spans.ts';
import { sampleDocauthCompleted } from './sample.ts';
import type { PublishEventInput } from './schema.ts';

/** What {@link publishEvent} needs: the database, the delivery scheduler, and the key ring that seals payloads. */
export interface PublishDeps {
  db: Database;
  scheduler: DeliveryScheduler;
  secretBox: SecretBox;
}

/** The accepted event and its deliveries. */
export interface PublishedEvent {
  eventId: string;
  deliveryIds: string[];
  /** False when the producer's `id` had been published before (nothing new was created). */
  created: boolean;
}

/**
 * An event stored with its deliveries whose publishing did not finish: a workflow start, or the
 * record that they all started, failed. Nothing is lost: the repair check starts what did not
 * start, and publishing again with the same `id` does it now.
 */
export class EventNotDispatchedError extends Error {
  /** The stored event and its deliveries. */
  readonly event: PublishedEvent;
  /** Why publishing did not finish: the message of its cause, whatever was thrown. */
  readonly reason: string;

  constructor(event: PublishedEvent, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`event ${event.eventId} is stored, but publishing it did not finish: ${reason}`, { cause });
    this.name = 'EventNotDispatchedError';
    this.event = event;
    this.reason = reason;
  }
}

/** An event the producers' door accepts: stored, its workflows started or left to the repair check. */
export interface AcceptedEvent extends PublishedEvent {
  /** Why its workflows were not all started now (the repair check starts them); absent when they were. */
  startsLater?: string;
}

/**
 * What a request's publish (`publishEvent`, `publishTestEvent`) accepted. An event stored whose
 * publishing did not finish (Temporal did not answer) is accepted all the same: the repair check
 * starts its workflows, and an error would have a producer that sends no `id` publish it twice.
 */
export async function acceptedEvent<T extends PublishedEvent | undefined>(publishing: Promise<T>): Promise<AcceptedEvent | Exclude<T, PublishedEvent>> {
  try {
    return (await publishing) as AcceptedEvent | Exclude<T, PublishedEvent>;
  } catch (error) {
    if (!(error instanceof EventNotDispatchedError)) throw error;
    return { ...error.event, startsLater: error.reason };
  }
}

/**
 * Starts the delivery workflows of a stored event and records that it is dispatched. The starts
 * join the trace of the request that accepted the event (its stored `traceparent`), also when the
 * repair check makes them later.
 */
export async function dispatchEvent(
  deps: Pick<PublishDeps, 'db' | 'scheduler'>,
  event: EventRow,
  targets: readonly DeliveryTarget[],
): Promise<void> {
  await withTraceparent(event.traceparent, () =>
    deps.scheduler.start(targets.map((target) => ({ ...target, projectId: event.projectId, event: event.event }))),
  );
  await markEventDispatched(deps.db, event.id);
}

/**
 * Accepts an event: stores it with one `pending` delivery per active, subscribed webhook
 * (one transaction), then starts a delivery workflow per delivery. When this resolves,
 * every delivery is durable in both the database and Temporal. If the process dies in
 * between, the repair check starts the missing workflows; publishing again with
 * the same `id` returns the same ids and creates nothing new. A failure once the event is stored
 * is an {@link EventNotDispatchedError}.
 */
export async function publishEvent(deps: PublishDeps, input: PublishEventInput, onlyWebhookId?: string): Promise<PublishedEvent> {
  const recorded = await recordEvent(deps.db, deps.secretBox, {
    projectId: input.project_id,
    producerEventId: input.id,
    event: input.event,
    occurredAt: input.occurred_at ? new Date(input.occurred_at) : new Date(),
    payload: input.data,
    onlyWebhookId,
    traceparent: currentTraceparent(),
  });
  annotateActiveSpan({ [SpanAttributes.eventId]: recorded.event.id, [SpanAttributes.deliveryCount]: recorded.deliveries.length });
  const published = {
    eventId: recorded.event.id,
    deliveryIds: recorded.deliveries.map((target) => target.deliveryId),
    created: recorded.created,
  };
  if (recorded.created || !recorded.event.dispatchedAt) {
    try {
      await dispatchEvent(deps, recorded.event, recorded.deliveries);
    } catch (error) {
      throw new EventNotDispatchedError(published, error);
    }
  }
  return published;
}

/**
 * Publishes a sample `docauth.completed` to one webhook of `projectId` only: a real event,
 * stored, signed and retried like any other. When the webhook is not active (disabled or deleted
 * since the caller looked), nothing is stored and this resolves to undefined.
 */
export async function publishTestEvent(deps: PublishDeps, projectId: string, webhookId: string): Promise<PublishedEvent | undefined> {
  try {
    return await publishEvent(deps, { project_id: projectId, event: 'docauth.completed', data: sampleDocauthCompleted() }, webhookId);
  } catch (error) {
    if (error instanceof WebhookNotDeliverableError) return undefined;
    throw error;
  }
}
