import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows, type Database, type DatabaseHandle } from '../../src/db/client.ts';
import { finishAttempt, startAttempt, type AttemptResult } from '../../src/db/queries/deliveries.ts';
import { updateWebhook } from '../../src/db/queries/webhooks.ts';
import { destinationLimits, projectLimits, sendPlaces, sendWaiters, webhooks } from '../../src/db/schema.ts';
import { acquireSendPlaces, releaseSendPlaces, turnRecheckMs, wakeForgottenLineHeads, type FlowLimits, type PlaceDecision } from '../../src/flow-control/places.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { openTestDatabase } from '../support/database.ts';
import { storedDeliveries, storedProject, webhookWithDeliveries as storeWebhookWithDeliveries, type StoredProject } from '../support/stored-deliveries.ts';

let handle: DatabaseHandle;
const box = new SecretBox(generateEncryptionKey());
const limits: FlowLimits = { webhookMaxInFlight: 2, projectMaxInFlight: 100, destinationMaxInFlight: 100, holdMs: 60_000, reserveMs: 60_000 };

beforeAll(async () => {
  handle = await openTestDatabase();
});
afterAll(async () => {
  await handle?.close();
});

let sequence = 0;
/** A project of its own, with an API key. */
const newProject = () => storedProject(handle.db, `flow-${(sequence += 1)}`);

/** A webhook of `project` (a new project by default) at `url`, and `count` deliveries to it. */
async function webhookWithDeliveries(count: number, options: { rateLimit?: number; url?: string; project?: StoredProject } = {}) {
  const project = options.project ?? (await newProject());
  const stored = await storeWebhookWithDeliveries(handle.db, box, project, { url: options.url ?? `https://127.0.0.1:1/hooks/${sequence}`, count, rateLimit: options.rateLimit });
  return { ...stored, project };
}

/** The attempt id the activity would give a delivery's `n`-th attempt. */
const attemptOf = (deliveryId: string, n = 1) => `run/${deliveryId}/${n}`;
const acquire = (deliveryId: string, with_: FlowLimits = limits, n = 1) => acquireSendPlaces(handle.db, deliveryId, attemptOf(deliveryId, n), with_);
const release = (deliveryId: string, with_: FlowLimits = limits, n = 1) => releaseSendPlaces(handle.db, deliveryId, attemptOf(deliveryId, n), with_);
const decisionOf = async (decision: Promise<PlaceDecision>) => (await decision).decision;
/** The levels of the places a delivery holds: `w`, `p`, `d`. */
const placesOf = async (deliveryId: string) =>
  (await handle.db.select({ scope: sendPlaces.scope }).from(sendPlaces).where(eq(sendPlaces.deliveryId, deliveryId))).map((place) => place.scope[0]).sort();

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

describe('places of a webhook', () => {
  it('grants ENDPOINT_MAX_IN_FLIGHT places, queues the rest first come first served, and wakes the oldest in line when a place frees', async () => {
    const { ids } = await webhookWithDeliveries(4);
    const [first, second, third, fourth] = ids as [string, string, string, string];
    expect(await acquire(first)).toEqual({ decision: 'granted', wake: [] });
    expect(await acquire(second)).toEqual({ decision: 'granted', wake: [] });
    expect(await acquire(third)).toEqual({ decision: 'wait_turn', blocked: 'webhook', ahead: 0, wake: [] });
    expect(await acquire(fourth)).toEqual({ decision: 'wait_turn', blocked: 'webhook', ahead: 1, wake: [] });
    // Asking again keeps its place in line.
    expect(await acquire(fourth)).toMatchObject({ decision: 'wait_turn', ahead: 1 });

    expect(await release(first)).toEqual([third]);
    // The freed place is the woken delivery's turn: one behind it in line does not take it.
    expect(await decisionOf(acquire(fourth))).toBe('wait_turn');
    expect(await acquire(third)).toEqual({ decision: 'granted', wake: [] });
    expect(await release(second)).toEqual([fourth]);
    expect(await decisionOf(acquire(fourth))).toBe('granted');
    expect(await release(third)).toEqual([]);
    expect(await release(fourth)).toEqual([]);
    expect(await handle.db.select().from(sendWaiters).where(sql`${sendWaiters.deliveryId} in ${ids}`)).toHaveLength(0);
  });

  it('never gives more places than the limit to requests that arrive together, nor loses one on release', async () => {
    const { webhookId, ids } = await webhookWithDeliveries(24);
    const decisions = await Promise.all(ids.map((id) => acquire(id)));
    const granted = ids.filter((_, i) => decisions[i]!.decision === 'granted');
    expect(granted).toHaveLength(limits.webhookMaxInFlight);
    // Releasing them together wakes one waiter for each place given back.
    const woken = (await Promise.all(granted.map((id) => release(id)))).flat();
    expect(woken).toHaveLength(limits.webhookMaxInFlight);
    expect(new Set(woken).size).toBe(limits.webhookMaxInFlight);
    // The woken ones come back and get the places; nobody else does.
    expect(await Promise.all(woken.map((id) => decisionOf(acquire(id))))).toEqual(woken.map(() => 'granted'));
    const held = await handle.db.select().from(sendPlaces).where(sql`${sendPlaces.scope} = ${`w:${webhookId}`} and ${sendPlaces.deliveryId} is not null`);
    expect(held.map((row) => row.deliveryId).sort()).toEqual([...woken].sort());
  });

  it('serves a line whose woken deliveries come back and give their places back all at once: no deadlock, never more than the limit in flight, nobody left', async () => {
    const wide = { ...limits, webhookMaxInFlight: 4 };
    const { ids } = await webhookWithDeliveries(40);
    const served = new Set<string>();
    let inFlight = 0;
    let mostInFlight = 0;
    // As the activity does: ask, send, give back, and the deliveries woken ask in turn.
    const serve = async (id: string): Promise<void> => {
      if ((await acquire(id, wide)).decision !== 'granted') return;
      served.add(id);
      mostInFlight = Math.max(mostInFlight, (inFlight += 1));
      await new Promise((resolve) => setImmediate(resolve));
      inFlight -= 1;
      await Promise.all((await release(id, wide)).map(serve));
    };
    await Promise.all(ids.map(serve));
    // A waiter that a wake passed over while another call held its row, or that gave up waiting
    // for its line's lock, is left to its own recheck (turnRecheckMs): those left ask again, as
    // their workflows would.
    for (let round = 0; served.size < ids.length && round < 40; round += 1) {
      await Promise.all(ids.filter((id) => !served.has(id)).map(serve));
    }
    expect(served.size).toBe(ids.length);
    expect(mostInFlight).toBeLessThanOrEqual(wide.webhookMaxInFlight);
    expect(await handle.db.select().from(sendWaiters).where(sql`${sendWaiters.deliveryId} in ${ids}`)).toHaveLength(0);
  });

  it("keeps one webhook's line from touching another's places", async () => {
    const busy = await webhookWithDeliveries(3);
    const other = await webhookWithDeliveries(1);
    for (const id of busy.ids) await acquire(id);
    expect(await decisionOf(acquire(other.ids[0]!))).toBe('granted');
    await release(other.ids[0]!);
  });

  it('frees the places of a hold that lapsed (its worker died) for the next who asks, and wakes the head of a line that waits meanwhile', async () => {
    const { ids } = await webhookWithDeliveries(4);
    const short = { ...limits, holdMs: 400 };
    await acquire(ids[0]!, short);
    await acquire(ids[1]!, short);
    expect(await decisionOf(acquire(ids[2]!, short))).toBe('wait_turn');
    await new Promise((resolve) => setTimeout(resolve, 450));
    // A newcomer goes behind the line, but wakes its head: places are free and nobody will give one back.
    expect(await acquire(ids[3]!, short)).toMatchObject({ decision: 'wait_turn', wake: [ids[2]] });
    expect(await decisionOf(acquire(ids[2]!, short))).toBe('granted');
  });

  it("spaces an open breaker's probes by CIRCUIT_BREAKER_PROBE_INTERVAL, its line waiting behind, and not once it has closed", async () => {
    const probing: FlowLimits = { ...limits, probeIntervalMs: 400 };
    const { webhookId, ids } = await webhookWithDeliveries(3);
    const [first, second, third] = ids as [string, string, string];
    await handle.db.update(webhooks).set({ circuitOpenedAt: new Date() }).where(eq(webhooks.id, webhookId));
    expect(await acquire(first, probing)).toEqual({ decision: 'granted', wake: [] });
    expect(await release(first, probing)).toEqual([]);
    // The next probe may start 400 ms after the first: it keeps the webhook's one place until then.
    const next = await acquire(second, probing);
    expect(next).toMatchObject({ decision: 'wait_until', reason: 'probe' });
    expect(next.decision === 'wait_until' && next.waitMs).toBeGreaterThan(200);
    expect(await decisionOf(acquire(third, probing))).toBe('wait_turn');
    await new Promise((resolve) => setTimeout(resolve, next.decision === 'wait_until' ? next.waitMs + 20 : 0));
    expect(await decisionOf(acquire(second, probing))).toBe('granted');
    // Closed: sends are not spaced any more.
    await handle.db.update(webhooks).set({ circuitOpenedAt: null }).where(eq(webhooks.id, webhookId));
    expect(await decisionOf(acquire(third, probing))).toBe('granted');
  });

  it("says a send behind an open breaker waits for the webhook's rate, not its probe, when the rate's step is the longer", async () => {
    const { webhookId, ids } = await webhookWithDeliveries(2, { rateLimit: 0.5 });
    await handle.db.update(webhooks).set({ circuitOpenedAt: new Date() }).where(eq(webhooks.id, webhookId));
    const probing: FlowLimits = { ...limits, probeIntervalMs: 400 };
    expect(await decisionOf(acquire(ids[0]!, probing))).toBe('granted');
    expect(await release(ids[0]!, probing)).toEqual([]);
    const next = await acquire(ids[1]!, probing);
    expect(next).toMatchObject({ decision: 'wait_until', reason: 'rate' });
    // Two seconds apart, the rate's step.
    expect(next.decision === 'wait_until' && next.waitMs).toBeGreaterThan(1_500);
  });

  it('allows one send at a time while the circuit breaker is open', async () => {
    const { webhookId, ids } = await webhookWithDeliveries(2);
    await handle.db.update(webhooks).set({ circuitOpenedAt: new Date() }).where(eq(webhooks.id, webhookId));
    expect(await decisionOf(acquire(ids[0]!))).toBe('granted');
    expect(await decisionOf(acquire(ids[1]!))).toBe('wait_turn');
    expect(await release(ids[0]!)).toEqual([ids[1]]);
  });

  it('asks the head of a line to ask again soon, those near it later, the rest rarely', () => {
    expect(turnRecheckMs({ decision: 'wait_turn', blocked: 'webhook', ahead: 0, wake: [] }, limits)).toBe(30_000);
    expect(turnRecheckMs({ decision: 'wait_turn', blocked: 'webhook', ahead: 1, wake: [] }, limits)).toBe(120_000);
    expect(turnRecheckMs({ decision: 'wait_turn', blocked: 'webhook', ahead: limits.webhookMaxInFlight, wake: [] }, limits)).toBe(900_000);
    expect(turnRecheckMs({ decision: 'wait_turn', blocked: 'destination', ahead: limits.webhookMaxInFlight, wake: [] }, limits)).toBe(120_000);
  });
});

describe('places of a project and of a destination', () => {
  it("bounds a project's sends across its webhooks, and its webhooks take turns at the project's places", async () => {
    const project = await newProject();
    const projectLimit = { ...limits, webhookMaxInFlight: 10, projectMaxInFlight: 3 };
    const a = await webhookWithDeliveries(3, { project });
    const b = await webhookWithDeliveries(2, { project });
    for (const id of a.ids) expect(await decisionOf(acquire(id, projectLimit))).toBe('granted');
    expect(await acquire(b.ids[0]!, projectLimit)).toEqual({ decision: 'wait_turn', blocked: 'project', ahead: 0, wake: [] });
    // B's next delivery waits behind B's first, in B's line.
    expect(await acquire(b.ids[1]!, projectLimit)).toMatchObject({ decision: 'wait_turn', blocked: 'webhook' });
    // A place of A's comes back: the webhook waiting at the project is woken (A has nobody in line).
    expect(await release(a.ids[0]!, projectLimit)).toEqual([b.ids[0]]);
    expect(await decisionOf(acquire(b.ids[0]!, projectLimit))).toBe('granted');
    // Another project is not touched by this one's limit.
    expect(await decisionOf(acquire((await webhookWithDeliveries(1)).ids[0]!, projectLimit))).toBe('granted');
  });

  it("lets a project's webhooks take turns at its places, one wake a release, however long one webhook's line", async () => {
    const project = await newProject();
    const projectLimit = { ...limits, webhookMaxInFlight: 10, projectMaxInFlight: 2 };
    const busy = await webhookWithDeliveries(6, { project });
    const quiet = await webhookWithDeliveries(1, { project });
    const [first, second, ...rest] = busy.ids as [string, string, ...string[]];
    expect(await decisionOf(acquire(first, projectLimit))).toBe('granted');
    expect(await decisionOf(acquire(second, projectLimit))).toBe('granted');
    for (const id of rest) expect(await decisionOf(acquire(id, projectLimit))).toBe('wait_turn');
    expect(await acquire(quiet.ids[0]!, projectLimit)).toMatchObject({ decision: 'wait_turn', blocked: 'project' });
    // The busy webhook's head waited longer: its turn first.
    expect(await release(first, projectLimit)).toEqual([rest[0]]);
    expect(await decisionOf(acquire(rest[0]!, projectLimit))).toBe('granted');
    // Then the quiet webhook's, though the busy one has four more in line from before it came.
    expect(await release(second, projectLimit)).toEqual([quiet.ids[0]]);
    expect(await decisionOf(acquire(quiet.ids[0]!, projectLimit))).toBe('granted');
    expect(await release(rest[0]!, projectLimit)).toEqual([rest[1]]);
  });

  it("wakes a webhook's line when its last send gives its places to another webhook's delivery, so the line learns where it waits", async () => {
    const project = await newProject();
    const oneEach = { ...limits, webhookMaxInFlight: 1, projectMaxInFlight: 1 };
    const a = await webhookWithDeliveries(1, { project });
    const c = await webhookWithDeliveries(2, { project });
    const [c1, c2] = c.ids as [string, string];
    expect(await decisionOf(acquire(c1, oneEach))).toBe('granted');
    // A's delivery waits for the project's place; C's second, behind it, for C's own place.
    expect(await acquire(a.ids[0]!, oneEach)).toMatchObject({ decision: 'wait_turn', blocked: 'project' });
    expect(await acquire(c2, oneEach)).toMatchObject({ decision: 'wait_turn', blocked: 'webhook' });
    // C's send ends: A's delivery waited longer and gets the turn; C's line is woken as well, or
    // nothing would ever wake it (C has no send left to end, and its head waits at C's places).
    expect(await release(c1, oneEach)).toEqual([a.ids[0], c2]);
    expect(await decisionOf(acquire(a.ids[0]!, oneEach))).toBe('granted');
    expect(await acquire(c2, oneEach)).toMatchObject({ decision: 'wait_turn', blocked: 'project' });
    // Now it waits at the project's places, where A's release finds it.
    expect(await release(a.ids[0]!, oneEach)).toEqual([c2]);
    expect(await decisionOf(acquire(c2, oneEach))).toBe('granted');
  });

  it("bounds the sends of every project to one destination, host and port as written, and wakes the webhook that waited there longest", async () => {
    const url = (path: string) => `https://Shared.Example:8443/${path}`;
    const destinationLimit = { ...limits, destinationMaxInFlight: 2 };
    const first = await webhookWithDeliveries(2, { url: url('one') });
    const second = await webhookWithDeliveries(1, { url: url('two') });
    const third = await webhookWithDeliveries(1, { url: url('three') });
    const elsewhere = await webhookWithDeliveries(1, { url: 'https://shared.example/other-port' });
    const [row] = await handle.db.select({ destination: webhooks.destination }).from(webhooks).where(eq(webhooks.id, first.webhookId));
    expect(row!.destination).toBe('shared.example:8443');

    for (const id of first.ids) expect(await decisionOf(acquire(id, destinationLimit))).toBe('granted');
    expect(await acquire(second.ids[0]!, destinationLimit)).toMatchObject({ decision: 'wait_turn', blocked: 'destination', ahead: 0 });
    expect(await acquire(third.ids[0]!, destinationLimit)).toMatchObject({ decision: 'wait_turn', blocked: 'destination', ahead: 1 });
    expect(await decisionOf(acquire(elsewhere.ids[0]!, destinationLimit))).toBe('granted');
    expect(await release(first.ids[0]!, destinationLimit)).toEqual([second.ids[0]]);
    expect(await release(first.ids[1]!, destinationLimit)).toEqual([third.ids[0]]);
    expect(await decisionOf(acquire(second.ids[0]!, destinationLimit))).toBe('granted');
    expect(await decisionOf(acquire(third.ids[0]!, destinationLimit))).toBe('granted');
  });

  it("applies the operator's limit of a project and of a destination over the configured ones", async () => {
    const project = await newProject();
    await handle.db.insert(projectLimits).values({ projectId: project.projectId, maxInFlight: 1, updatedAt: new Date() });
    const own = await webhookWithDeliveries(2, { project });
    expect(await decisionOf(acquire(own.ids[0]!))).toBe('granted');
    expect(await acquire(own.ids[1]!)).toMatchObject({ decision: 'wait_turn', blocked: 'project' });

    await handle.db.insert(destinationLimits).values({ destination: 'limited.example:443', maxInFlight: 1, updatedAt: new Date() });
    const a = await webhookWithDeliveries(1, { url: 'https://limited.example/a' });
    const b = await webhookWithDeliveries(1, { url: 'https://LIMITED.example:443/b' });
    expect(await decisionOf(acquire(a.ids[0]!))).toBe('granted');
    expect(await acquire(b.ids[0]!)).toMatchObject({ decision: 'wait_turn', blocked: 'destination' });
  });
});

describe('an attempt that timed out', () => {
  it("keeps its places for the delivery's next attempt, after its backoff, and wakes nobody; a new round does not wait out the backoff", async () => {
    const { ids } = await webhookWithDeliveries(3);
    const [slow, second, waiting] = ids as [string, string, string];
    expect(await decisionOf(acquire(slow))).toBe('granted');
    expect(await decisionOf(acquire(second))).toBe('granted');
    expect(await decisionOf(acquire(waiting))).toBe('wait_turn');
    // Attempt 1 timed out; attempt 2 comes after a backoff of 300 ms.
    expect(await releaseSendPlaces(handle.db, slow, attemptOf(slow, 1), limits, 300)).toEqual([]);
    expect(await decisionOf(acquire(waiting))).toBe('wait_turn');
    expect(await acquire(slow, limits, 2)).toMatchObject({ decision: 'wait_until', waitMs: expect.any(Number) });
    await new Promise((resolve) => setTimeout(resolve, 320));
    expect(await decisionOf(acquire(slow, limits, 3))).toBe('granted');
    // The round ends (delivered, or its last attempt failed): the places go to the next in line.
    expect(await release(slow, limits, 3)).toEqual([waiting]);

    // Kept again after another timeout, a manual retry's new round goes at once.
    expect(await decisionOf(acquire(waiting))).toBe('granted');
    expect(await releaseSendPlaces(handle.db, waiting, attemptOf(waiting, 1), limits, 60_000)).toEqual([]);
    expect(await decisionOf(acquireSendPlaces(handle.db, waiting, attemptOf(waiting, 7), limits, true))).toBe('granted');
  });
});

describe('one attempt in flight per delivery', () => {
  it('lets a later attempt of a delivery send only once the earlier one has given its places back or its hold has lapsed', async () => {
    const { ids } = await webhookWithDeliveries(1);
    const id = ids[0]!;
    const short = { ...limits, holdMs: 600 };
    const beforeFirst = Date.now();
    expect(await decisionOf(acquire(id, short, 1))).toBe('granted');
    // Attempt 1's worker stopped answering; the server retries the activity: attempt 2 waits out
    // attempt 1's hold, what is left of its 600 ms (less what the two calls took, give or take
    // the few milliseconds the database's clock and this one differ).
    const fenced = await acquire(id, short, 2);
    const elapsed = Date.now() - beforeFirst;
    expect(fenced).toMatchObject({ decision: 'wait_until', reason: 'attempt' });
    const waitMs = fenced.decision === 'wait_until' ? fenced.waitMs : 0;
    expect(waitMs).toBeGreaterThanOrEqual(600 - elapsed - 10);
    expect(waitMs).toBeLessThanOrEqual(600);
    await new Promise((resolve) => setTimeout(resolve, 650));
    expect(await decisionOf(acquire(id, short, 3))).toBe('granted');
    // Attempt 1 ends late: its release does not free attempt 3's places.
    expect(await release(id, short, 1)).toEqual([]);
    const held = await handle.db.select().from(sendPlaces).where(eq(sendPlaces.deliveryId, id));
    expect(held.map((place) => place.attempt)).toEqual([attemptOf(id, 3), attemptOf(id, 3), attemptOf(id, 3)]);
    await release(id, short, 3);
    expect(await handle.db.select().from(sendPlaces).where(eq(sendPlaces.deliveryId, id))).toEqual([]);
  });

  it("leaves a later attempt's place in line alone when the earlier attempt gives back after its places lapsed and went to others", async () => {
    const { ids } = await webhookWithDeliveries(3);
    const [id, other, another] = ids as [string, string, string];
    // Attempt 1's worker is cut off past its hold; two other deliveries take the webhook's places.
    expect(await decisionOf(acquire(id, { ...limits, holdMs: 300 }, 1))).toBe('granted');
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(await decisionOf(acquire(other))).toBe('granted');
    expect(await decisionOf(acquire(another))).toBe('granted');
    // The activity's retry, attempt 2, waits in line for a place.
    expect(await acquire(id, limits, 2)).toMatchObject({ decision: 'wait_turn', blocked: 'webhook', ahead: 0 });
    // Attempt 1's worker is back, and gives back what it no longer holds.
    expect(await release(id, limits, 1)).toEqual([]);
    expect(await handle.db.select().from(sendWaiters).where(eq(sendWaiters.deliveryId, id))).toHaveLength(1);
    // So the next place given back is attempt 2's turn.
    expect(await release(other)).toEqual([id]);
    expect(await decisionOf(acquire(id, limits, 2))).toBe('granted');
    await release(id, limits, 2);
    await release(another);
  });
});

describe('lines nobody will wake', () => {
  /** The heads the repair check would wake now, with no minimum wait. */
  const forgotten = () => wakeForgottenLineHeads(handle.db, limits, 0, 100);

  it("are the lines waiting while a place within their scope's limit is free, not a place the breaker or the operator's limit leaves unused", async () => {
    const { webhookId, ids } = await webhookWithDeliveries(3);
    const [holder, released, waiter] = ids as [string, string, string];
    // The webhook's two places are made; one is held, the other given back.
    await acquire(holder);
    await acquire(released);
    await release(released);
    // The breaker opens: one place is all the webhook has, and it is held; the line behind it
    // waits for that one. The second place is free, but not for this line.
    await handle.db.update(webhooks).set({ circuitOpenedAt: new Date() }).where(eq(webhooks.id, webhookId));
    expect(await acquire(waiter)).toMatchObject({ decision: 'wait_turn', blocked: 'webhook' });
    expect(await forgotten()).not.toContain(waiter);
    // Its holder's worker dies and the hold is gone with nobody to wake the line: now it is forgotten.
    await handle.db.update(sendPlaces).set({ deliveryId: null, attempt: null, expiresAt: '-infinity' }).where(eq(sendPlaces.deliveryId, holder));
    expect(await forgotten()).toContain(waiter);
  });

  it("are woken fairly among projects: one project's many forgotten lines do not hold back another's", async () => {
    /** A line whose two holders' worker died: a forgotten head, waiting while both places are free. */
    const forgottenLine = async (project: StoredProject) => {
      const { ids } = await webhookWithDeliveries(3, { project });
      const [first, second, waiter] = ids as [string, string, string];
      await acquire(first);
      await acquire(second);
      expect(await acquire(waiter)).toMatchObject({ decision: 'wait_turn', blocked: 'webhook' });
      await handle.db.update(sendPlaces).set({ deliveryId: null, attempt: null, expiresAt: '-infinity' }).where(sql`${sendPlaces.deliveryId} in (${first}, ${second})`);
      return waiter;
    };
    await forgotten(); // what earlier tests left is woken now, out of the way
    const busy = await newProject();
    const busyHeads: string[] = [];
    for (let i = 0; i < 4; i += 1) busyHeads.push(await forgottenLine(busy));
    const quietHead = await forgottenLine(await newProject());

    // The quiet project's one line waited least, yet it is in the first run of two.
    const firstRun = await wakeForgottenLineHeads(handle.db, limits, 0, 2);
    expect(firstRun).toHaveLength(2);
    expect(firstRun).toContain(quietHead);
    expect(busyHeads).toContain(firstRun.find((id) => id !== quietHead));
    expect((await forgotten()).sort()).toEqual(busyHeads.filter((id) => !firstRun.includes(id)).sort());
  });

  it('leave alone a line behind a project whose limit the operator lowered below the places made', async () => {
    const project = await newProject();
    const first = await webhookWithDeliveries(1, { project });
    const second = await webhookWithDeliveries(1, { project });
    // The project's places are made up to the configured limit at its first send.
    expect(await decisionOf(acquire(first.ids[0]!))).toBe('granted');
    await handle.db.insert(projectLimits).values({ projectId: project.projectId, maxInFlight: 1, updatedAt: new Date() });
    expect(await acquire(second.ids[0]!)).toMatchObject({ decision: 'wait_turn', blocked: 'project' });
    expect(await forgotten()).not.toContain(second.ids[0]);
  });

  it('a lowered limit holds whatever the order of the places on disk: a send takes the lowest free place', async () => {
    const project = await newProject();
    const first = await webhookWithDeliveries(1, { project });
    const second = await webhookWithDeliveries(1, { project });
    // The project's places in reverse slot order on disk, as new rows filling space freed earlier leave them.
    const scope = `p:${project.projectId}`;
    await handle.db.insert(sendPlaces).values(Array.from({ length: limits.projectMaxInFlight }, (_, i) => ({ scope, slot: limits.projectMaxInFlight - i })));
    expect(await decisionOf(acquire(first.ids[0]!))).toBe('granted');
    await handle.db.insert(projectLimits).values({ projectId: project.projectId, maxInFlight: 1, updatedAt: new Date() });
    expect(await acquire(second.ids[0]!)).toMatchObject({ decision: 'wait_turn', blocked: 'project' });
  });
});

describe('the rate limit', () => {
  it("spaces the starts by the webhook's rate limit, each waiting delivery with a start time of its own", async () => {
    const { ids } = await webhookWithDeliveries(3, { rateLimit: 4 });
    const wide = { ...limits, webhookMaxInFlight: 10 };
    // 4 a second: starts 250 ms apart. Each wait is counted from the moment its call is answered,
    // so what the calls took (a loaded machine) is taken off it: bounds from the clock, not fixed.
    const beforeFirst = Date.now();
    expect(await decisionOf(acquire(ids[0]!, wide))).toBe('granted');
    const beforeSecond = Date.now();
    const second = await acquire(ids[1]!, wide);
    const afterSecond = Date.now();
    const third = await acquire(ids[2]!, wide);
    const afterThird = Date.now();
    const waitOf = (decision: PlaceDecision) => (decision.decision === 'wait_until' ? decision.waitMs : 0);
    // The database's clock and this one agree within a few milliseconds.
    const skewMs = 10;
    expect(second).toMatchObject({ decision: 'wait_until', reason: 'rate' });
    expect(waitOf(second)).toBeGreaterThanOrEqual(250 - (afterSecond - beforeFirst) - skewMs);
    expect(waitOf(second)).toBeLessThanOrEqual(250);
    expect(third).toMatchObject({ decision: 'wait_until', reason: 'rate' });
    expect(waitOf(third) - waitOf(second)).toBeGreaterThanOrEqual(250 - (afterThird - beforeSecond) - skewMs);
    expect(waitOf(third) - waitOf(second)).toBeLessThanOrEqual(250 + skewMs);
    await new Promise((resolve) => setTimeout(resolve, waitOf(second) + 20));
    // Its start time has come: the next activity of the delivery is granted without a new reservation.
    expect(await decisionOf(acquire(ids[1]!, wide, 2))).toBe('granted');
  });

  it("keeps only its webhook's place until a send's start: its host's places serve other customers meanwhile, and are taken again at the start", async () => {
    const host = `https://shared-${(sequence += 1)}.example`;
    const hostOfTwo = { ...limits, webhookMaxInFlight: 10, destinationMaxInFlight: 2 };
    const limited = await webhookWithDeliveries(2, { rateLimit: 1, url: `${host}/limited` });
    const other = await webhookWithDeliveries(1, { url: `${host}/other` });
    const [first, waiting] = limited.ids as [string, string];
    const otherCustomers = other.ids[0]!;
    expect(await decisionOf(acquire(first, hostOfTwo))).toBe('granted');
    const start = await acquire(waiting, hostOfTwo);
    expect(start).toMatchObject({ decision: 'wait_until', reason: 'rate' });
    expect(await placesOf(waiting)).toEqual(['w']);
    // The host has two places: one sends, and the other is not held idle by a send waiting for its start.
    expect(await acquire(otherCustomers, hostOfTwo)).toEqual({ decision: 'granted', wake: [] });

    await new Promise((resolve) => setTimeout(resolve, (start.decision === 'wait_until' ? start.waitMs : 0) + 20));
    // Its start has come while the host is full: it waits in line for the host, keeping its webhook's place.
    expect(await acquire(waiting, hostOfTwo, 2)).toMatchObject({ decision: 'wait_turn', blocked: 'destination' });
    expect(await placesOf(waiting)).toEqual(['w']);
    expect(await release(otherCustomers, hostOfTwo)).toEqual([waiting]);
    expect(await decisionOf(acquire(waiting, hostOfTwo, 2))).toBe('granted');
    expect(await placesOf(waiting)).toEqual(['d', 'p', 'w']);
    expect(await handle.db.select().from(sendWaiters).where(eq(sendWaiters.deliveryId, waiting))).toEqual([]);
  });
});

describe('a new rate limit', () => {
  it("locks the waiting sends' places before the webhook's row, as a request for places does, so the two never wait for each other", async () => {
    const { webhookId, ids } = await webhookWithDeliveries(2, { rateLimit: 1 });
    const [first, waiting] = ids as [string, string];
    expect(await decisionOf(acquire(first))).toBe('granted');
    expect(await acquire(waiting)).toMatchObject({ decision: 'wait_until', reason: 'rate' });
    // A request for places holding the waiting send's place, which then moves the webhook's
    // rate schedule (its row), as acquire_send_places does after an open breaker took back a
    // start's reserved places.
    let placeLocked!: () => void;
    const locked = new Promise<void>((resolve) => (placeLocked = resolve));
    const request = handle.db.transaction(async (tx) => {
      await queryRows(tx, sql`select 1 from send_places where delivery_id = ${waiting} for update`);
      placeLocked();
      await new Promise((resolve) => setTimeout(resolve, 300));
      return (await queryRows(tx, sql`select 1 from webhooks where id = ${webhookId} for update`)).length;
    });
    await locked;
    const [webhookRowLocked, updated] = await Promise.all([request, updateWebhook(handle.db, box, webhookId, { rateLimit: 5 })]);
    expect(webhookRowLocked).toBe(1);
    // Its start, a second after the first's, is brought forward to now under the new limit.
    expect(updated?.startsBroughtForward).toEqual([waiting]);
  });
});

describe('the circuit breaker', () => {
  it('opens after the threshold of failed attempts in a row and closes on a success', async () => {
    const { webhookId, ids } = await webhookWithDeliveries(2);
    const [deliveryId, another] = ids as [string, string];
    const circuit = async () => {
      const [row] = await handle.db
        .select({ openedAt: webhooks.circuitOpenedAt, closedAt: webhooks.circuitClosedAt, failures: webhooks.consecutiveFailures })
        .from(webhooks)
        .where(eq(webhooks.id, webhookId));
      return row!;
    };
    const changes: (string | undefined)[] = [];
    for (let i = 0; i < 4; i += 1) {
      const started = await startAttempt(handle.db, box, deliveryId, new Date());
      changes.push((await finishAttempt(handle.db, failure(started!.attempt!.attemptId, deliveryId, webhookId), 3)).circuit);
    }
    expect(changes).toEqual([undefined, undefined, 'opened', undefined]);
    expect(await circuit()).toMatchObject({ failures: 4, openedAt: expect.any(Date), closedAt: null });

    const started = await startAttempt(handle.db, box, deliveryId, new Date());
    const closed = await finishAttempt(
      handle.db,
      { ...failure(started!.attempt!.attemptId, deliveryId, webhookId), outcome: 'succeeded', statusCode: 200, error: undefined },
      3,
    );
    expect(closed.circuit).toBe('closed');
    // When it closed: the deliveries made before are the endpoint's backlog (paced, see below).
    const closedAt = (await circuit()).closedAt;
    expect(await circuit()).toEqual({ failures: 0, openedAt: null, closedAt: expect.any(Date) });
    // A success with the breaker closed leaves that time as it is.
    const again = await startAttempt(handle.db, box, another, new Date());
    await finishAttempt(handle.db, { ...failure(again!.attempt!.attemptId, another, webhookId), outcome: 'succeeded', statusCode: 200, error: undefined }, 3);
    expect((await circuit()).closedAt).toEqual(closedAt);
  });
});

describe("an endpoint's recovery", () => {
  /** Two a second: one start every 500 ms on a project's recovery schedule. */
  const paced: FlowLimits = { ...limits, recoveryRate: 2 };
  /** The breaker of `webhookId` closed now: its deliveries made before are its backlog. */
  const closeBreaker = (webhookId: string) => handle.db.update(webhooks).set({ circuitClosedAt: sql`now()` }).where(eq(webhooks.id, webhookId));

  it("gives its backlog's sends starts on the project's recovery schedule, across its webhooks, and leaves alone deliveries made since", async () => {
    const first = await webhookWithDeliveries(3);
    const second = await webhookWithDeliveries(1, { project: first.project });
    await closeBreaker(first.webhookId);
    await closeBreaker(second.webhookId);
    const [now, next, third] = first.ids as [string, string, string];
    const [later] = second.ids as [string];
    // created_at has a millisecond's precision and the close time a microsecond's: a delivery
    // stored in the millisecond the breaker closed would be made before it, of the backlog.
    await new Promise((resolve) => setTimeout(resolve, 2));
    const since = (await storedDeliveries(handle.db, box, first.project.projectId, second.webhookId, 1))[0]!;

    expect(await acquire(now, paced)).toEqual({ decision: 'granted', wake: [] });
    const nextWait = await acquire(next, paced);
    expect(nextWait).toMatchObject({ decision: 'wait_until', reason: 'recovery' });
    const laterWait = await acquire(later, paced);
    expect(laterWait).toMatchObject({ decision: 'wait_until', reason: 'recovery' });
    const waitOf = (decision: PlaceDecision) => (decision.decision === 'wait_until' ? decision.waitMs : 0);
    // Each start is 500 ms after the previous one (less the milliseconds these calls took).
    expect(waitOf(nextWait)).toBeGreaterThan(300);
    expect(waitOf(nextWait)).toBeLessThanOrEqual(500);
    // The project's schedule is one for all its webhooks: the second webhook's backlog goes after.
    expect(waitOf(laterWait) - waitOf(nextWait)).toBeGreaterThan(300);
    expect(waitOf(laterWait)).toBeLessThanOrEqual(1000);
    // Until its start a paced send keeps its webhook's place only, as a rate-limited one does.
    expect(await placesOf(next)).toEqual(['w']);
    // The webhook's two places are taken (one sends, one waits for its start): its line waits.
    expect(await decisionOf(acquire(third, paced))).toBe('wait_turn');
    // A delivery made since the breaker closed is not of the backlog.
    expect(await decisionOf(acquire(since, paced))).toBe('granted');

    await new Promise((resolve) => setTimeout(resolve, waitOf(nextWait) + 20));
    expect(await decisionOf(acquire(next, paced))).toBe('granted');
    expect(await placesOf(next)).toEqual(['d', 'p', 'w']);
  });

  it('is not paced with PROJECT_RECOVERY_RATE at 0, nor while the breaker is open again', async () => {
    // PROJECT_RECOVERY_RATE=0 reaches the places as no rate (src/config.ts).
    const unpaced: FlowLimits = { ...limits, recoveryRate: null };
    const { webhookId, ids } = await webhookWithDeliveries(2);
    await closeBreaker(webhookId);
    expect(await decisionOf(acquire(ids[0]!, unpaced))).toBe('granted');
    expect(await decisionOf(acquire(ids[1]!, unpaced))).toBe('granted');
    const reopened = await webhookWithDeliveries(1);
    await closeBreaker(reopened.webhookId);
    await handle.db.update(webhooks).set({ circuitOpenedAt: sql`now()` }).where(eq(webhooks.id, reopened.webhookId));
    expect(await decisionOf(acquire(reopened.ids[0]!, paced))).toBe('granted');
    // A rate of 0 from a caller is no pace either, not a division by zero.
    const zero = await webhookWithDeliveries(2);
    await closeBreaker(zero.webhookId);
    expect(await decisionOf(acquire(zero.ids[0]!, { ...limits, recoveryRate: 0 }))).toBe('granted');
    expect(await decisionOf(acquire(zero.ids[1]!, { ...limits, recoveryRate: 0 }))).toBe('granted');
  });

  it("follows the project's own recovery rate where the operator set one, and none at its 0", async () => {
    const own = await webhookWithDeliveries(3);
    await handle.db.insert(projectLimits).values({ projectId: own.project.projectId, recoveryRate: 10, updatedAt: new Date() });
    await closeBreaker(own.webhookId);
    const [first, second, third] = own.ids as [string, string, string];
    expect(await decisionOf(acquire(first, paced))).toBe('granted');
    // Ten a second: 100 ms apart, not the 500 ms of the configured two.
    const next = await acquire(second, paced);
    expect(next).toMatchObject({ decision: 'wait_until', reason: 'recovery' });
    expect(next.decision === 'wait_until' && next.waitMs).toBeLessThanOrEqual(100);
    expect(await release(first, paced)).toEqual([]);
    expect(await decisionOf(acquire(third, paced))).toBe('wait_until');

    const unpaced = await webhookWithDeliveries(2);
    await handle.db.insert(projectLimits).values({ projectId: unpaced.project.projectId, recoveryRate: 0, updatedAt: new Date() });
    await closeBreaker(unpaced.webhookId);
    expect(await decisionOf(acquire(unpaced.ids[0]!, paced))).toBe('granted');
    expect(await decisionOf(acquire(unpaced.ids[1]!, paced))).toBe('granted');
  });
});

describe('a give-back that meets a lock on its place', () => {
  /**
   * Runs `giveBack` while another transaction holds a row lock on slot 1 of the webhook's places
   * for 200 ms, as a waiter's locking read does on PostgreSQL: it waited for a free place, found
   * it just taken, passed it over and keeps the lock until its own call ends.
   */
  async function whileLocked<T>(webhookId: string, giveBack: () => Promise<T>): Promise<T> {
    let isLocked!: () => void;
    const locked = new Promise<void>((resolve) => (isLocked = resolve));
    const lockEnds = new Promise<void>((resolve) => setTimeout(resolve, 200));
    const locker = handle.db.transaction(async (tx) => {
      await queryRows(tx, sql`select slot from send_places where scope = ${`w:${webhookId}`} and slot = 1 for update`);
      isLocked();
      await lockEnds;
    });
    await locked;
    const [answer] = await Promise.all([giveBack(), locker]);
    return answer;
  }

  it('waits for that lock and frees the place, so the next in line behind an open breaker is served now, not when the hold lapses', async () => {
    const { webhookId, ids } = await webhookWithDeliveries(2);
    const [holder, waiter] = ids as [string, string];
    await handle.db.update(webhooks).set({ circuitOpenedAt: new Date() }).where(eq(webhooks.id, webhookId));
    expect(await decisionOf(acquire(holder))).toBe('granted');
    expect(await decisionOf(acquire(waiter))).toBe('wait_turn');
    expect(await whileLocked(webhookId, () => release(holder))).toEqual([waiter]);
    expect(await decisionOf(acquire(waiter))).toBe('granted');
  });

  it("waits for that lock to keep a timed-out attempt's places for the delivery's next attempt", async () => {
    const { webhookId, ids } = await webhookWithDeliveries(1);
    const id = ids[0]!;
    expect(await decisionOf(acquire(id))).toBe('granted');
    expect(await whileLocked(webhookId, () => releaseSendPlaces(handle.db, id, attemptOf(id, 1), limits, 60_000))).toEqual([]);
    const kept = await handle.db.select().from(sendPlaces).where(eq(sendPlaces.deliveryId, id));
    expect(kept.map((place) => [place.attempt, place.notBefore === null])).toEqual([
      [null, false],
      [null, false],
      [null, false],
    ]);
  });
});

describe('a request for places that meets a give-back of its delivery', () => {
  it("locks what the delivery holds in the give-back's order, so a lapsed hold is taken back while the give-back runs, with neither waiting for the other", async () => {
    const { ids } = await webhookWithDeliveries(1);
    const id = ids[0]!;
    expect(await decisionOf(acquire(id))).toBe('granted');
    await handle.db.update(sendPlaces).set({ expiresAt: sql`now() - interval '1 second'` }).where(eq(sendPlaces.deliveryId, id));
    // A late give-back of the first attempt: it locks the webhook's place, then, a moment later,
    // the destination's, as release_send_places does.
    let webhookLocked!: () => void;
    const locked = new Promise<void>((resolve) => (webhookLocked = resolve));
    const giveBack = handle.db.transaction(async (tx) => {
      await queryRows(tx, sql`select 1 from send_places where delivery_id = ${id} and scope like 'w:%' for update`);
      webhookLocked();
      await new Promise((resolve) => setTimeout(resolve, 300));
      return (await queryRows(tx, sql`select 1 from send_places where delivery_id = ${id} and scope like 'd:%' for update`)).length;
    });
    await locked;
    const [destinationLocked, second] = await Promise.all([giveBack, acquire(id, limits, 2)]);
    expect(destinationLocked).toBe(1);
    expect(second).toEqual({ decision: 'granted', wake: [] });
    expect(await placesOf(id)).toEqual(['d', 'p', 'w']);
  });
});

describe('a request for places and a give-back at the same instant', () => {
  const single = { ...limits, webhookMaxInFlight: 1 };

  /**
   * Runs `call` in a transaction that stays open 100 ms after it answered (a give-back commits
   * sooner; a request tries the line's lock for 500 ms), while `meanwhile` runs; answers both.
   */
  async function heldOpen<T, U>(call: (tx: Database) => Promise<T>, meanwhile: () => Promise<U>): Promise<[T, U]> {
    let answered!: (value: T) => void;
    const answer = new Promise<T>((resolve) => (answered = resolve));
    const transaction = handle.db.transaction(async (tx) => {
      answered(await call(tx));
      await new Promise((resolve) => setTimeout(resolve, 100));
    });
    const first = await answer;
    const [second] = await Promise.all([meanwhile(), transaction]);
    return [first, second];
  }

  it('gives the place to a request that comes while the give-back of it has not committed, rather than leave it in line until its recheck', async () => {
    const { ids } = await webhookWithDeliveries(2);
    const [holder, waiter] = ids as [string, string];
    expect(await decisionOf(acquire(holder, single))).toBe('granted');
    const [woken, asked] = await heldOpen(
      (tx) => releaseSendPlaces(tx, holder, attemptOf(holder), single),
      () => acquire(waiter, single),
    );
    expect(woken).toEqual([]);
    expect(asked).toEqual({ decision: 'granted', wake: [] });
  });

  it('wakes a request that joined the line in a transaction not yet committed when the place was given back', async () => {
    const { ids } = await webhookWithDeliveries(2);
    const [holder, waiter] = ids as [string, string];
    expect(await decisionOf(acquire(holder, single))).toBe('granted');
    const [asked, woken] = await heldOpen(
      (tx) => acquireSendPlaces(tx, waiter, attemptOf(waiter), single),
      () => release(holder, single),
    );
    expect(asked).toEqual({ decision: 'wait_turn', blocked: 'webhook', ahead: 0, wake: [] });
    expect(woken).toEqual([waiter]);
    expect(await decisionOf(acquire(waiter, single))).toBe('granted');
  });

  it("does the same at a destination's places, shared by two projects", async () => {
    const url = `https://127.0.0.7:${1000 + sequence}/hooks`;
    const narrow = { ...limits, destinationMaxInFlight: 1 };
    const first = await webhookWithDeliveries(2, { url });
    const second = await webhookWithDeliveries(1, { url });
    const [holder, queued] = first.ids as [string, string];
    const other = second.ids[0]!;
    expect(await decisionOf(acquire(holder, narrow))).toBe('granted');
    const [woken, asked] = await heldOpen(
      (tx) => releaseSendPlaces(tx, holder, attemptOf(holder), narrow),
      () => acquire(other, narrow),
    );
    expect([woken, asked]).toEqual([[], { decision: 'granted', wake: [] }]);
    const [queuedAsked, wokenNext] = await heldOpen(
      (tx) => acquireSendPlaces(tx, queued, attemptOf(queued), narrow),
      () => release(other, narrow),
    );
    expect(queuedAsked).toEqual({ decision: 'wait_turn', blocked: 'destination', ahead: 0, wake: [] });
    expect(wokenNext).toEqual([queued]);
  });
});

describe('the destination of a URL', () => {
  it('is the host in lower case and the port, 443 when none is written', async () => {
    const cases: [string, string][] = [
      ['https://Example.COM/path?q=1', 'example.com:443'],
      ['https://example.com:8443/x', 'example.com:8443'],
      ['https://127.0.0.2:0443/', '127.0.0.2:443'],
      ['https://[2001:DB8::1]:9000/a', '[2001:db8::1]:9000'],
      ['https://[::1]/', '[::1]:443'],
    ];
    const rows = await queryRows<{ url: string; destination: string }>(
      handle.db,
      sql`select url, url_destination(url) as destination from (values ${sql.join(cases.map(([url]) => sql`(${url})`), sql`, `)}) as urls (url)`,
    );
    expect(rows.map((row) => [row.url, row.destination])).toEqual(cases);
  });
});
