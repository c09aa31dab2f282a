import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../../src/db/client.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { markEventDispatched, recordEvent } from '../../src/db/queries/events.ts';
import { insertWebhook } from '../../src/db/queries/webhooks.ts';
import { events, webhooks } from '../../src/db/schema.ts';
import { parseConfig } from '../../src/config.ts';
import { createMetrics, renderMetrics } from '../../src/metrics.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { openTestDatabase } from '../support/database.ts';
import { docauthData } from '../support/harness.ts';

/*
 * The gauges /metrics reads from the database at each scrape, on a real database (PGlite, or
 * PostgreSQL with DATABASE_URL): what they count, and what a scrape says when the database is gone.
 */

const box = new SecretBox(generateEncryptionKey());
let database: DatabaseHandle;

beforeAll(async () => {
  database = await openTestDatabase();
});
afterAll(async () => {
  await database.close().catch(() => {});
});

/** The value of an unlabelled series in a text exposition. */
function valueOf(text: string, name: string): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  if (!line) throw new Error(`${name} is not in the exposition`);
  return Number(line.slice(name.length + 1));
}

async function scrape(handle: DatabaseHandle) {
  const text = await renderMetrics(createMetrics({ database: { db: handle.db, limits: parseConfig({}).flow } }));
  return {
    databaseUp: valueOf(text, 'webhook_database_up'),
    openCircuits: valueOf(text, 'webhook_circuit_breakers_open'),
    oldestOpenCircuitSeconds: valueOf(text, 'webhook_circuit_breaker_oldest_open_seconds'),
    undispatchedEvents: valueOf(text, 'webhook_events_undispatched'),
    oldestUndispatchedSeconds: valueOf(text, 'webhook_events_undispatched_oldest_seconds'),
  };
}

async function webhookWithBreakerOpenFor(projectId: string, apiKeyId: string, openForSeconds: number | null) {
  const webhook = await insertWebhook(database.db, box, projectId, {
    apiKeyId,
    url: 'https://example.com/hooks',
    events: ['docauth.completed'],
    headers: {},
    secret: 'whsec_test',
  });
  const openedAt = openForSeconds === null ? null : sql`now() - make_interval(secs => ${openForSeconds})`;
  await database.db.update(webhooks).set({ circuitOpenedAt: openedAt }).where(eq(webhooks.id, webhook.id));
  return webhook;
}

describe('the gauges read from the database', () => {
  it('are 0, and the database up, on an empty installation', async () => {
    expect(await scrape(database)).toEqual({
      databaseUp: 1,
      openCircuits: 0,
      oldestOpenCircuitSeconds: 0,
      undispatchedEvents: 0,
      oldestUndispatchedSeconds: 0,
    });
  });

  it("count the open breakers of active webhooks and the age of the longest open, and the outbox's undispatched events and the oldest's age", async () => {
    const projectId = 'gauges';
    const { key } = await createApiKey(database.db, { projectId, services: ['webhooks'] });
    await webhookWithBreakerOpenFor(projectId, key.id, 7200);
    await webhookWithBreakerOpenFor(projectId, key.id, 60);
    await webhookWithBreakerOpenFor(projectId, key.id, null);
    const disabled = await webhookWithBreakerOpenFor(projectId, key.id, 86_400);
    await database.db.update(webhooks).set({ status: 'disabled' }).where(eq(webhooks.id, disabled.id));

    const dispatched = await recordEvent(database.db, box, { projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData() });
    await markEventDispatched(database.db, dispatched.event.id);
    const stuck = await recordEvent(database.db, box, { projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData() });
    await database.db.update(events).set({ createdAt: sql`now() - interval '90 seconds'` }).where(eq(events.id, stuck.event.id));
    await recordEvent(database.db, box, { projectId, event: 'docauth.completed', occurredAt: new Date(), payload: docauthData() });

    const figures = await scrape(database);
    expect(figures.databaseUp).toBe(1);
    // The disabled webhook's breaker stays open but needs nobody: it is not counted.
    expect(figures.openCircuits).toBe(2);
    expect(figures.oldestOpenCircuitSeconds).toBeGreaterThanOrEqual(7200);
    expect(figures.oldestOpenCircuitSeconds).toBeLessThan(7200 + 60);
    expect(figures.undispatchedEvents).toBe(2);
    expect(figures.oldestUndispatchedSeconds).toBeGreaterThanOrEqual(90);
    expect(figures.oldestUndispatchedSeconds).toBeLessThan(90 + 60);
  });

  it('say the database is down, and are NaN rather than a made-up 0, once it does not answer; the rest of /metrics is still served', async () => {
    const gone = await openTestDatabase();
    await gone.close();
    const metrics = createMetrics({ database: { db: gone.db, limits: parseConfig({}).flow } });
    metrics.eventsAccepted.inc();
    const text = await renderMetrics(metrics);
    expect(valueOf(text, 'webhook_database_up')).toBe(0);
    for (const name of ['webhook_circuit_breakers_open', 'webhook_circuit_breaker_oldest_open_seconds', 'webhook_events_undispatched', 'webhook_events_undispatched_oldest_seconds']) {
      expect(valueOf(text, name), name).toBeNaN();
    }
    expect(valueOf(text, 'webhook_events_accepted_total')).toBe(1);
  });
});
