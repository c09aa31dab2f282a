import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../../src/db/client.ts';
import { createApiKey } from '../../src/db/queries/api-keys.ts';
import { finishAttempt, startAttempt, type AttemptResult } from '../../src/db/queries/deliveries.ts';
import { recordEvent } from '../../src/db/queries/events.ts';
import { insertWebhook } from '../../src/db/queries/webhooks.ts';
import { sendPermits, webhooks } from '../../src/db/schema.ts';
import { acquireSendPermit, releaseSendPermit, turnRecheckMs, type FlowLimits } from '../../src/flow-control/permits.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets.ts';
import { openTestDatabase } from '../support/database.ts';
import { docauthData } from '../support/event-data.ts';

let handle: DatabaseHandle;
const box = new SecretBox(generateEncryptionKey());
const limits: FlowLimits = { maxInFlight: 2, holdMs: 60_000, reserveMs: 60_000 };

beforeAll(async () => {
  handle = await openTestDatabase();
});
afterAll(async () => {
  await handle?.close();
});

let sequence = 0;

/** A webhook of a project of its own, and `count` deliveries to it. */
async function webhookWithDeliveries(count: number, rateLimit?: number) {
  const projectId = `flow-${(sequence += 1)}`;
  const { key } = await createApiKey(handle.db, { projectId, services: ['webhooks'] });
  const webhook = await insertWebhook(handle.db, box, projectId, {
    apiKeyId: key.id,
    url: 'https://127.0.0.1:1/hooks',
    events: ['docauth.completed'],
    headers: {},
    rateLimit,
    secret: 'whsec_test',
  });
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const recorded = await recordEvent(handle.db, box, {
      projectId,
      producerEventId: `evt-${i}`,
      event: 'docauth.completed',
      occurredAt: new Date(),
      payload: docauthData(),
    });
    ids.push(recorded.deliveries[0]!.deliveryId);
  }
  return { webhookId: webhook.id, ids };
}

const failure = (attemptId: string, deliveryId: string, webhookId: string): AttemptResult => ({
  attemptId,
  deliveryId,
  webhookId,
  outcome: 'http_error',
  statusCode: 500,
  error: 'HTTP 500 Internal Server Error',
  durationMs: 5,
  finishedAt: new Date(),
  nextStatus: { status: 'failed', nextRetryAt: new Date(Date.now() + 1_000) },
});

describe('places at an endpoint', () => {
  it('grants ENDPOINT_MAX_IN_FLIGHT places, queues the rest first come first served, and hands a freed place to the oldest in line', async () => {
    const { ids } = await webhookWithDeliveries(4);
    const [first, second, third, fourth] = ids as [string, string, string, string];
    expect(await acquireSendPermit(handle.db, first, limits)).toEqual({ decision: 'granted', wake: [] });
    expect(await acquireSendPermit(handle.db, second, limits)).toEqual({ decision: 'granted', wake: [] });
    expect(await acquireSendPermit(handle.db, third, limits)).toEqual({ decision: 'wait_turn', ahead: 0, wake: [] });
    expect(await acquireSendPermit(handle.db, fourth, limits)).toEqual({ decision: 'wait_turn', ahead: 1, wake: [] });
    // Asking again keeps the place in line.
    expect((await acquireSendPermit(handle.db, fourth, limits)).decision).toBe('wait_turn');

    expect(await releaseSendPermit(handle.db, first, limits)).toEqual([third]);
    // The place is kept for the woken delivery: a newcomer does not take it.
    expect((await acquireSendPermit(handle.db, fourth, limits)).decision).toBe('wait_turn');
    expect(await acquireSendPermit(handle.db, third, limits)).toEqual({ decision: 'granted', wake: [] });
    expect(await releaseSendPermit(handle.db, second, limits)).toEqual([fourth]);
    expect((await acquireSendPermit(handle.db, fourth, limits)).decision).toBe('granted');
    expect(await releaseSendPermit(handle.db, third, limits)).toEqual([]);
    expect(await releaseSendPermit(handle.db, fourth, limits)).toEqual([]);
    expect(await handle.db.select().from(sendPermits)).toHaveLength(0);
  });

  it('never gives more places than the limit to requests that arrive together, nor loses one on release', async () => {
    const { ids } = await webhookWithDeliveries(24);
    const decisions = await Promise.all(ids.map((id) => acquireSendPermit(handle.db, id, limits)));
    const granted = ids.filter((_, i) => decisions[i]!.decision === 'granted');
    expect(granted).toHaveLength(limits.maxInFlight);
    // Releasing them together passes each freed place to exactly one waiter.
    const woken = (await Promise.all(granted.map((id) => releaseSendPermit(handle.db, id, limits)))).flat();
    expect(woken).toHaveLength(limits.maxInFlight);
    expect(new Set(woken).size).toBe(limits.maxInFlight);
    const held = await handle.db.select().from(sendPermits).where(eq(sendPermits.state, 'held'));
    expect(held.map((row) => row.deliveryId).sort()).toEqual([...woken].sort());
  });

  it("keeps one endpoint's line from touching another's places", async () => {
    const busy = await webhookWithDeliveries(3);
    const other = await webhookWithDeliveries(1);
    for (const id of busy.ids) await acquireSendPermit(handle.db, id, limits);
    expect((await acquireSendPermit(handle.db, other.ids[0]!, limits)).decision).toBe('granted');
    await releaseSendPermit(handle.db, other.ids[0]!, limits);
  });

  it('frees the place of a hold that lapsed (its worker died) and gives it to the next in line', async () => {
    const { ids } = await webhookWithDeliveries(3);
    const short = { ...limits, holdMs: 400 };
    await acquireSendPermit(handle.db, ids[0]!, short);
    await acquireSendPermit(handle.db, ids[1]!, short);
    expect((await acquireSendPermit(handle.db, ids[2]!, short)).decision).toBe('wait_turn');
    await new Promise((resolve) => setTimeout(resolve, 450));
    // The next request of anyone at this endpoint reaps the lapsed holds.
    const again = await acquireSendPermit(handle.db, ids[2]!, short);
    expect(again.decision).toBe('granted');
  });

  it('frees lapsed holds on a release too, and wakes the next in line', async () => {
    const { ids } = await webhookWithDeliveries(4);
    const short = { ...limits, holdMs: 400 };
    await acquireSendPermit(handle.db, ids[0]!, short);
    await acquireSendPermit(handle.db, ids[1]!, short);
    await acquireSendPermit(handle.db, ids[2]!, short);
    await acquireSendPermit(handle.db, ids[3]!, short);
    await new Promise((resolve) => setTimeout(resolve, 450));
    // The first holder's release frees its own place and the second's lapsed one: both waiters go.
    expect((await releaseSendPermit(handle.db, ids[0]!, short)).sort()).toEqual([ids[2], ids[3]].sort());
  });

  it('asks those near the head of the line to ask again soon, the rest rarely', () => {
    expect(turnRecheckMs(0, limits)).toBe(30_000);
    expect(turnRecheckMs(limits.maxInFlight - 1, limits)).toBe(30_000);
    expect(turnRecheckMs(limits.maxInFlight, limits)).toBe(300_000);
  });

  it('allows one send at a time while the circuit breaker is open', async () => {
    const { webhookId, ids } = await webhookWithDeliveries(2);
    await handle.db.update(webhooks).set({ circuitOpenedAt: new Date() }).where(eq(webhooks.id, webhookId));
    expect((await acquireSendPermit(handle.db, ids[0]!, limits)).decision).toBe('granted');
    expect((await acquireSendPermit(handle.db, ids[1]!, limits)).decision).toBe('wait_turn');
    expect(await releaseSendPermit(handle.db, ids[0]!, limits)).toEqual([ids[1]]);
  });

  it("spaces the starts by the webhook's rate limit, each waiting delivery with a start time of its own", async () => {
    const { ids } = await webhookWithDeliveries(3, 4);
    const wide = { ...limits, maxInFlight: 10 };
    expect((await acquireSendPermit(handle.db, ids[0]!, wide)).decision).toBe('granted');
    const second = await acquireSendPermit(handle.db, ids[1]!, wide);
    const third = await acquireSendPermit(handle.db, ids[2]!, wide);
    expect(second.decision).toBe('wait_until');
    expect(third.decision).toBe('wait_until');
    const waitOf = (decision: typeof second) => (decision.decision === 'wait_until' ? decision.waitMs : 0);
    expect(waitOf(second)).toBeGreaterThan(150);
    expect(waitOf(second)).toBeLessThanOrEqual(250);
    expect(waitOf(third) - waitOf(second)).toBeGreaterThan(200);
    await new Promise((resolve) => setTimeout(resolve, waitOf(second) + 20));
    // Its start time has come: granted without a new reservation.
    expect((await acquireSendPermit(handle.db, ids[1]!, wide)).decision).toBe('granted');
  });
});

describe('the circuit breaker', () => {
  it('opens after the threshold of failed attempts in a row and closes on a success', async () => {
    const { webhookId, ids } = await webhookWithDeliveries(1);
    const deliveryId = ids[0]!;
    const circuit = async () => {
      const [row] = await handle.db
        .select({ openedAt: webhooks.circuitOpenedAt, failures: webhooks.consecutiveFailures })
        .from(webhooks)
        .where(eq(webhooks.id, webhookId));
      return row!;
    };
    const changes: (string | undefined)[] = [];
    for (let i = 0; i < 4; i += 1) {
      const started = await startAttempt(handle.db, deliveryId, new Date());
      changes.push((await finishAttempt(handle.db, failure(started!.attempt!.attemptId, deliveryId, webhookId), 3)).circuit);
    }
    expect(changes).toEqual([undefined, undefined, 'opened', undefined]);
    expect(await circuit()).toMatchObject({ failures: 4, openedAt: expect.any(Date) });

    const started = await startAttempt(handle.db, deliveryId, new Date());
    const closed = await finishAttempt(
      handle.db,
      { ...failure(started!.attempt!.attemptId, deliveryId, webhookId), outcome: 'succeeded', statusCode: 200, error: undefined },
      3,
    );
    expect(closed.circuit).toBe('closed');
    expect(await circuit()).toEqual({ failures: 0, openedAt: null });
  });
});
