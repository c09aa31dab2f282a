/** The customers of a run: a project's API key, producer key and webhooks, made the way a customer gets them. */
import type { Database } from '../../src/db/client.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { setProjectLimits } from '../../src/db/queries/limits.ts';

/** A project of the run, with its webhooks in the order of their URLs. */
export interface BenchProject {
  projectId: string;
  /** The project's API key (services `webhooks`): the v2 management API, e.g. bulk retries. */
  apiToken: string;
  /** The producer key the run publishes the project's events with (it publishes for this project only). */
  producerKey: string;
  webhooks: { id: string; secret: string }[];
}

/**
 * Creates the project's API key and producer key straight in the database (as `npm run cli --
 * keys create` does), then one `docauth.completed` webhook per URL through the v2 API, spread
 * over the API replicas. With `publishRate`, the project gets the operator's publish quota of that
 * many events a second (and a second's worth at once), as `npm run cli -- limits set` gives a
 * project whose load is known: a run that keeps the service's quota publishes at the rate it asks
 * for, while the neighbour under test stays at the configured one.
 */
export async function createProject(
  db: Database,
  apiUrls: readonly string[],
  projectId: string,
  urls: readonly string[],
  { publishRate }: { publishRate?: number } = {},
): Promise<BenchProject> {
  if (publishRate !== undefined) await setProjectLimits(db, projectId, { publishRate, publishBurst: Math.max(1, Math.ceil(publishRate)) });
  const { key, token } = await createApiKey(db, { projectId, services: ['webhooks'], name: 'bench' });
  const producer = await createApiKey(db, { projectId, services: ['events'], name: 'bench producer' });
  const webhooks: BenchProject['webhooks'] = [];
  for (const [i, url] of urls.entries()) {
    const res = await fetch(`${apiUrls[i % apiUrls.length]}/api-gateway/v2/webhooks`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ api_key_id: key.id, url, events: ['docauth.completed'], headers: { 'X-Customer-Tag': 'bench' } }),
    });
    const body = (await res.json()) as { data?: { id?: string; secret?: string }; error?: unknown };
    if (res.status !== 201 || !body.data?.id || !body.data.secret) throw new Error(`creating webhook ${i} failed: ${res.status} ${JSON.stringify(body)}`);
    webhooks.push({ id: body.data.id, secret: body.data.secret });
  }
  return { projectId, apiToken: token, producerKey: producer.token, webhooks };
}
