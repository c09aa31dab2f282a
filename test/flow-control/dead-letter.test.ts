/**
 * A round that ends in `dead_letter` while its delivery waits in line (its last activity failed
 * before it was served: the database unreachable for that call, or its worker gone) gives its
 * place in line back. Kept, it would stand at the head of its webhook's line until the delivery's
 * retry or its workflow's end, 7 days later: every release would wake it in vain and every later
 * delivery of the webhook would queue behind it.
 */
import { Client, Connection } from '@temporalio/client';
import { eq, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../../src/db/client.ts';
import { deliveries, sendWaiters } from '../../src/db/schema.ts';
import { createSender } from '../../src/delivery/sender.ts';
import { createMetrics } from '../../src/metrics.ts';
import { acquireSendPlaces, releaseSendPlaces, type FlowLimits } from '../../src/flow-control/places.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { activityCompletion } from '../../src/temporal/activity-completion.ts';
import { openTestDatabase } from '../support/database.ts';
import { deliveryActivitiesFor } from '../support/delivery-activities.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';

let handle: DatabaseHandle;
const box = new SecretBox(generateEncryptionKey());
const limits: FlowLimits = { webhookMaxInFlight: 1, projectMaxInFlight: 100, destinationMaxInFlight: 100, holdMs: 60_000, reserveMs: 60_000 };
/** The deliveries the activities asked Temporal to wake (the `sendTurn` signal), in order. */
const signalled: string[] = [];
const stopping = new AbortController();
const sender = createSender({ timeoutMs: 1_000, allowPrivateTargets: true });

beforeAll(async () => {
  handle = await openTestDatabase();
});
afterAll(async () => {
  stopping.abort();
  sender.close();
  await handle?.close();
});

/** The delivery activities as the worker makes them; nothing here reaches Temporal but the wake signals, which are recorded. */
const deliveryActivities = (overrides: Partial<Parameters<typeof deliveryActivitiesFor>[0]> = {}) =>
  deliveryActivitiesFor({
    db: handle.db,
    secretBox: box,
    sender,
    limits,
    wake: async (deliveryIds) => {
      signalled.push(...deliveryIds);
      return [];
    },
    // Used only by sends handed to the background, which this test makes none of.
    completion: activityCompletion(new Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }) })),
    stopping: stopping.signal,
    ...overrides,
  });

describe('a dead letter in line', () => {
  it('gives its place in line back: the next delivery of its webhook is served when a place frees, and it is never woken in vain', async () => {
    const project = await storedProject(handle.db, 'dead-letter-line');
    const { ids } = await webhookWithDeliveries(handle.db, box, project, { url: 'https://127.0.0.1:1/hooks/dead-letter-line', count: 3 });
    const [holder, deadLetter, next] = ids as [string, string, string];
    const attemptOf = (deliveryId: string) => `run/${deliveryId}/1`;

    expect(await acquireSendPlaces(handle.db, holder, attemptOf(holder), limits)).toMatchObject({ decision: 'granted' });
    expect(await acquireSendPlaces(handle.db, deadLetter, attemptOf(deadLetter), limits)).toMatchObject({ decision: 'wait_turn', blocked: 'webhook' });

    // Its round's last activity failed while it waited: the workflow dead-letters it.
    await deliveryActivities().markDeadLetter(deadLetter, 'every attempt of the round failed');

    const [row] = await handle.db.select({ status: deliveries.status }).from(deliveries).where(eq(deliveries.id, deadLetter));
    expect(row?.status).toBe('dead_letter');
    expect(await handle.db.select().from(sendWaiters).where(eq(sendWaiters.deliveryId, deadLetter))).toEqual([]);

    const woken = await releaseSendPlaces(handle.db, holder, attemptOf(holder), limits);
    expect(woken).not.toContain(deadLetter);
    expect(await acquireSendPlaces(handle.db, next, attemptOf(next), limits)).toMatchObject({ decision: 'granted' });
    expect(signalled).not.toContain(deadLetter);
  });
});

describe('a dead letter whose activity fails after its row was written', () => {
  it('is counted once, by the call that completes', async () => {
    const project = await storedProject(handle.db, 'dead-letter-count');
    const { ids } = await webhookWithDeliveries(handle.db, box, project, { url: 'https://127.0.0.1:1/hooks/dead-letter-count', count: 1 });
    const metrics = createMetrics();
    // The endpoint-health check, the last write, fails once (a lock timeout, a blip): Temporal runs the activity again.
    let failures = 1;
    const db = new Proxy(handle.db, {
      get(target, property, receiver) {
        if (property !== 'execute') return Reflect.get(target, property, receiver);
        return (query: SQL) => {
          if (failures > 0 && new PgDialect().sqlToQuery(query).sql.includes('disabled_reason =')) {
            failures -= 1;
            return Promise.reject(new Error('canceling statement due to lock timeout'));
          }
          return target.execute(query);
        };
      },
    });
    const activities = deliveryActivities({ db, metrics });
    await expect(activities.markDeadLetter(ids[0]!, 'every attempt of the round failed')).rejects.toThrow('lock timeout');
    await activities.markDeadLetter(ids[0]!, 'every attempt of the round failed');
    expect(failures).toBe(0);
    expect(await metrics.registry.getSingleMetricAsString('webhook_deliveries_finished_total')).toContain('webhook_deliveries_finished_total{status="dead_letter"} 1');
  });
});
