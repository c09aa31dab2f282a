/**
 * A delivery woken for its turn after its workflow closed (terminated by an operator, or gone
 * with its namespace's history) gives back everything it held for a next attempt, not only its
 * place in line: a rate-limited send waiting in line keeps its webhook's place, and kept, that
 * place would stay idle until its hold lapsed, 16 minutes later.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendPlaces, sendWaiters } from '../../src/db/schema.ts';
import { createSender } from '../../src/delivery/sender.ts';
import { acquireSendPlaces, releaseSendPlaces, LONGEST_TURN_RECHECK_MS, type FlowLimits } from '../../src/flow-control/places.ts';
import { activityCompletion } from '../../src/temporal/activity-completion.ts';
import { deliveryActivitiesFor } from '../support/delivery-activities.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';
import { waitFor } from '../support/wait.ts';

let h: Harness;
const stopping = new AbortController();
const sender = createSender({ timeoutMs: 1_000, allowPrivateTargets: true });
/** A host of two places, a webhook of ten. */
const limits: FlowLimits = { webhookMaxInFlight: 10, projectMaxInFlight: 100, destinationMaxInFlight: 2, holdMs: 60_000, reserveMs: 60_000 };

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  stopping.abort();
  sender.close();
  await h?.stop();
});

/** The delivery activities as the worker makes them, waking deliveries through the real Temporal service. */
const deliveryActivities = () =>
  deliveryActivitiesFor({
    db: h.db,
    secretBox: h.secretBox,
    sender,
    limits,
    wake: (deliveryIds) => h.scheduler.wakeForTurn(deliveryIds),
    completion: activityCompletion(h.client),
    stopping: stopping.signal,
  });

const placesOf = async (deliveryId: string) =>
  h.db.select({ scope: sendPlaces.scope, expiresAt: sendPlaces.expiresAt }).from(sendPlaces).where(eq(sendPlaces.deliveryId, deliveryId));

describe('a delivery whose workflow has closed', () => {
  it('gives back the webhook place it kept while waiting in line when it is woken', async () => {
    const project = await storedProject(h.db, 'closed-workflow');
    const host = 'https://closed-workflow.example';
    const [first, waiting] = (await webhookWithDeliveries(h.db, h.secretBox, project, { url: `${host}/limited`, count: 2, rateLimit: 1 })).ids as [string, string];
    const [other] = (await webhookWithDeliveries(h.db, h.secretBox, project, { url: `${host}/other`, count: 1 })).ids as [string];
    const acquire = (deliveryId: string, n = 1) => acquireSendPlaces(h.db, deliveryId, `run/${deliveryId}/${n}`, limits);

    expect(await acquire(first)).toMatchObject({ decision: 'granted' });
    const start = await acquire(waiting);
    expect(start).toMatchObject({ decision: 'wait_until', reason: 'rate' });
    expect(await acquire(other)).toMatchObject({ decision: 'granted' });
    await new Promise((resolve) => setTimeout(resolve, (start.decision === 'wait_until' ? start.waitMs : 0) + 20));
    // Its start came while the host was full: it waits in line, keeping its webhook's place past
    // the longest time it goes without asking again.
    const askedAt = Date.now();
    expect(await acquire(waiting, 2)).toMatchObject({ decision: 'wait_turn', blocked: 'destination' });
    const kept = await placesOf(waiting);
    expect(kept.map((place) => place.scope[0])).toEqual(['w']);
    expect(Date.parse(kept[0]!.expiresAt)).toBeGreaterThan(askedAt + LONGEST_TURN_RECHECK_MS);

    // `other`'s attempt timed out, its places kept for its next attempt, and then its round ended.
    // None of these deliveries has a workflow: the host's place it gives back goes to `waiting`,
    // whose wake signal finds no workflow to wake.
    expect(await releaseSendPlaces(h.db, other, `run/${other}/1`, limits, 1_000)).toEqual([]);
    await deliveryActivities().markDeadLetter(other, 'every attempt of the round failed');
    await waitFor('the closed delivery to give back its webhook place', async () => (await placesOf(waiting)).length === 0, { timeoutMs: 10_000, intervalMs: 50 });
    expect(await h.db.select().from(sendWaiters).where(eq(sendWaiters.deliveryId, waiting))).toEqual([]);
  });
});
