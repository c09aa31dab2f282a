/**
 * An event's `data` at rest: sealed with the key ring of SECRET_ENCRYPTION_KEY (AES-256-GCM),
 * bound to the event's id, and findable by its `request_id` through a keyed hash only.
 */
import type { EventRow } from '../schema.ts';
import type { SecretBox } from '../../secrets/crypto.ts';

/** What is authenticated with an event's sealed payload: it opens for that event only. */
const sealContext = (eventId: string) => `event:${eventId}`;

/** The value behind an event's request-id lookup hash (per project, so projects never correlate). */
const requestIdKey = (projectId: string, requestId: string) => JSON.stringify([projectId, requestId]);

/** The stored form of an event's data: the sealed payload and its request-id lookup hash. */
export function sealPayload(box: SecretBox, eventId: string, projectId: string, data: Record<string, unknown>) {
  return {
    payloadSealed: box.seal(JSON.stringify(data), sealContext(eventId)),
    requestIdHash: typeof data['request_id'] === 'string' ? box.lookupHash(requestIdKey(projectId, data['request_id'])) : null,
  };
}

/** The event's data, opened; undefined once it has been erased. */
export function openPayload(box: SecretBox, event: Pick<EventRow, 'id' | 'payloadSealed' | 'payloadLegacy'>): Record<string, unknown> | undefined {
  if (event.payloadSealed) return JSON.parse(box.open(event.payloadSealed, sealContext(event.id))) as Record<string, unknown>;
  return event.payloadLegacy ?? undefined;
}

/** Every lookup hash an event of `projectId` with this `request_id` may carry (one per key of the ring). */
export function requestIdHashes(box: SecretBox, projectId: string, requestId: string): string[] {
  return box.lookupHashes(requestIdKey(projectId, requestId));
}
