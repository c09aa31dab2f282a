/**
 * Deliveries stored as the producers' door stores them, for tests that drive the delivery
 * activities or the send places directly: a project with an API key, a webhook of it, and events
 * recorded for that webhook only. Nothing is dispatched: no workflow is started.
 */
import type { Database } from '../../src/db/client.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { recordEvent } from '../../src/db/queries/events.ts';
import { insertWebhook } from '../../src/db/queries/webhooks.ts';
import type { SecretBox } from '../../src/secrets/crypto.ts';
import { docauthData } from './event-data.ts';

/** A project and the API key its webhooks are made with. */
export interface StoredProject {
  projectId: string;
  apiKeyId: string;
}

/** Creates `projectId`'s webhooks API key. */
export async function storedProject(db: Database, projectId: string): Promise<StoredProject> {
  const { key } = await createApiKey(db, { projectId, services: ['webhooks'] });
  return { projectId, apiKeyId: key.id };
}

/** A webhook of `project` at `url` (`docauth.completed`, no headers), and `count` deliveries to it, oldest first. */
export async function webhookWithDeliveries(
  db: Database,
  box: SecretBox,
  project: StoredProject,
  { url, count, rateLimit }: { url: string; count: number; rateLimit?: number },
): Promise<{ webhookId: string; ids: string[] }> {
  const webhook = await insertWebhook(db, box, project.projectId, {
    apiKeyId: project.apiKeyId,
    url,
    events: ['docauth.completed'],
    headers: {},
    rateLimit,
    secret: 'whsec_test',
  });
  return { webhookId: webhook.id, ids: await storedDeliveries(db, box, project.projectId, webhook.id, count) };
}

/** `count` events of `projectId` recorded for its webhook `webhookId` only, one after another: their deliveries' ids, oldest first. */
export async function storedDeliveries(db: Database, box: SecretBox, projectId: string, webhookId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const recorded = await recordEvent(db, box, { projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData(), onlyWebhookId: webhookId });
    ids.push(recorded.deliveries[0]!.deliveryId);
  }
  return ids;
}
