import { inArray, sql } from 'drizzle-orm';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateHistory } from '../../bench/scale/generate.ts';
import { queryRows } from '../../src/db/client.ts';
import { rotateWebhookSecret } from '../../src/db/queries/webhooks.ts';
import { webhooks } from '../../src/db/schema.ts';
import { openWebhookSigningSecrets } from '../../src/db/sealing.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { sweepAll, sweepCutoffs, type SweepCutoffs } from '../../src/retention/sweep.ts';
import { runCli, spawnCli } from '../support/cli.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { attemptIdsOf, seedPastEvent, seedProject, storedIds } from '../support/history.ts';

const DAY_MS = 86_400_000;
let database: SharedTestDatabase;
const box = new SecretBox(generateEncryptionKey());

beforeAll(async () => {
  database = await openSharedTestDatabase();
}, 120_000);
afterAll(async () => {
  await database?.close();
});

/** Every id in `all` that is not in `gone`, sorted. */
const without = (all: string[], gone: string[]) => all.filter((id) => !gone.includes(id)).sort();

describe('the retention sweep deletes exactly what is past the period', () => {
  const now = new Date();
  let seeded: Awaited<ReturnType<typeof seed>>;

  async function seed() {
    const { db } = database;
    const single = (await seedProject(db, box, 1)).projectId;
    const pair = (await seedProject(db, box, 2)).projectId;
    const none = (await seedProject(db, box, 0)).projectId;
    const one = (eventDaysAgo: number, status: Parameters<typeof seedPastEvent>[5][number]) =>
      seedPastEvent(db, box, single, now, eventDaysAgo, [status]);
    return {
      deliveredOld: await one(31, { status: 'delivered', updatedDaysAgo: 31, attempts: 2 }),
      deliveredYoung: await one(29, { status: 'delivered', updatedDaysAgo: 29 }),
      // An old event delivered recently (a manual retry): its delivery changed inside the period.
      retriedLate: await one(40, { status: 'delivered', updatedDaysAgo: 29 }),
      deadOld: await one(31, { status: 'dead_letter', updatedDaysAgo: 31, attempts: 5 }),
      pendingAncient: await one(100, { status: 'pending', updatedDaysAgo: 100 }),
      processingAncient: await one(100, { status: 'processing', updatedDaysAgo: 100 }),
      failedAncient: await one(100, { status: 'failed', updatedDaysAgo: 100, attempts: 3 }),
      mixed: await seedPastEvent(db, box, pair, now, 45, [
        { status: 'delivered', updatedDaysAgo: 44 },
        { status: 'failed', updatedDaysAgo: 44 },
      ]),
      unsubscribedOld: await seedPastEvent(db, box, none, now, 31, []),
      unsubscribedYoung: await seedPastEvent(db, box, none, now, 29, []),
      // For the 1-day run: dead letters inside and outside the dead-letter wait (7 days + 1).
      deadFiveDays: await one(5, { status: 'dead_letter', updatedDaysAgo: 5, attempts: 5 }),
      deadNineDays: await one(9, { status: 'dead_letter', updatedDaysAgo: 9, attempts: 5 }),
      deliveredTwoDays: await one(2, { status: 'delivered', updatedDaysAgo: 2 }),
      deliveredHalfDay: await one(0.5, { status: 'delivered', updatedDaysAgo: 0.5 }),
    };
  }

  beforeAll(async () => {
    seeded = await seed();
  }, 60_000);

  it('at 30 days, in batches: delivered and dead-lettered deliveries with their attempts, and events left without deliveries', async () => {
    const before = await storedIds(database.db);
    const goneDeliveries = [seeded.deliveredOld, seeded.deadOld].flatMap((e) => e.deliveryIds).concat(seeded.mixed.deliveryIds[0]!);
    const goneEvents = [seeded.deliveredOld, seeded.deadOld, seeded.unsubscribedOld].map((e) => e.eventId);
    const goneAttempts = await attemptIdsOf(database.db, goneDeliveries);
    expect(goneAttempts).toHaveLength(2 + 5 + 1);

    const batches: string[] = [];
    const deleted = await sweepAll(database.db, sweepCutoffs(new Date(), 30 * DAY_MS), {
      batchSize: 2,
      onBatch: (step) => batches.push(`${step.deliveries}/${step.events}/${step.previousSecrets}`),
    });

    expect(deleted).toEqual({ deliveries: 3, events: 3, previousSecrets: 0 });
    // Deliveries first (2, then 1: done); then the 8 events past the period, oldest first, two at
    // a time, each batch after the last event looked at: the 5 oldest keep an unswept delivery
    // and stay; a last batch finds none left, and no replaced secret to erase.
    expect(batches).toEqual(['2/0/0', '1/0/0', '0/0/0', '0/0/0', '0/1/0', '0/2/0', '0/0/0']);
    const after = await storedIds(database.db);
    expect(after.deliveries).toEqual(without(before.deliveries, goneDeliveries));
    expect(after.events).toEqual(without(before.events, goneEvents));
    expect(after.attempts).toEqual(without(before.attempts, goneAttempts));
  });

  it('deletes nothing more when run again (idempotent)', async () => {
    const before = await storedIds(database.db);
    expect(await sweepAll(database.db, sweepCutoffs(new Date(), 30 * DAY_MS))).toEqual({ deliveries: 0, events: 0, previousSecrets: 0 });
    expect(await storedIds(database.db)).toEqual(before);
  });

  it('`retention run --older-than 1d` keeps dead letters inside the dead-letter wait, and never a pending, processing or failed delivery', async () => {
    const before = await storedIds(database.db);
    const goneDeliveries = [seeded.deliveredYoung, seeded.retriedLate, seeded.deadNineDays, seeded.deliveredTwoDays].flatMap((e) => e.deliveryIds);
    const goneEvents = [seeded.deliveredYoung, seeded.retriedLate, seeded.deadNineDays, seeded.deliveredTwoDays, seeded.unsubscribedYoung].map(
      (e) => e.eventId,
    );
    const goneAttempts = await attemptIdsOf(database.db, goneDeliveries);

    const result = await runCli(['retention', 'run', '--older-than', '1d', '--batch-size', '3', '--json'], database.cliEnv);

    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report).toMatchObject({ older_than: '1d', deleted: { deliveries: 4, events: 5 } });
    expect(report.batches).toBeGreaterThan(2);
    expect(Date.parse(report.before) - Date.parse(report.dead_letter_before)).toBe(7 * DAY_MS);
    const after = await storedIds(database.db);
    expect(after.deliveries).toEqual(without(before.deliveries, goneDeliveries));
    expect(after.events).toEqual(without(before.events, goneEvents));
    expect(after.attempts).toEqual(without(before.attempts, goneAttempts));
    for (const kept of [seeded.pendingAncient, seeded.processingAncient, seeded.failedAncient, seeded.deadFiveDays, seeded.deliveredHalfDay]) {
      expect(after.deliveries).toEqual(expect.arrayContaining(kept.deliveryIds));
      expect(after.events).toContain(kept.eventId);
    }
    expect(after.deliveries).toContain(seeded.mixed.deliveryIds[1]);
    expect(after.events).toContain(seeded.mixed.eventId);
  });

  it('refuses a bad duration or batch size with one clear line (a usage error: exit 2)', async () => {
    const badDuration = await runCli(['retention', 'run', '--older-than', '30 days'], database.cliEnv);
    expect(badDuration.code).toBe(2);
    expect(badDuration.stderr.split('\n')[0]).toBe('error: --older-than must be a duration of at least 1h, such as 30d, 12h or 90m');
    // Shorter than the shortest RETENTION_PERIOD: deliveries a producer may still repeat would go.
    const tooShort = await runCli(['retention', 'run', '--older-than', '0s'], database.cliEnv);
    expect(tooShort.code).toBe(2);
    expect(tooShort.stderr.split('\n')[0]).toBe(badDuration.stderr.split('\n')[0]);
    const badBatch = await runCli(['retention', 'run', '--batch-size', '0'], database.cliEnv);
    expect(badBatch.code).toBe(2);
    expect(badBatch.stderr.split('\n')[0]).toBe('error: --batch-size must be a whole number from 1 to 100000');
  });
});

describe('a sweep killed in the middle', () => {
  interface Row {
    id: string;
    status: string;
    updated_at: string | Date;
  }
  const deliveryRows = () => queryRows<Row>(database.db, sql`select id, status, updated_at from deliveries`);
  const eventRows = () =>
    queryRows<{ id: string; created_at: string | Date; deliveries: number }>(
      database.db,
      sql`select id, created_at, (select count(*)::int from deliveries where deliveries.event_id = events.id) as deliveries from events`,
    );
  const pastRetention = (row: Row, cutoffs: SweepCutoffs) => {
    const updated = new Date(row.updated_at).getTime();
    return (
      (row.status === 'delivered' && updated < cutoffs.before.getTime()) ||
      (row.status === 'dead_letter' && updated < cutoffs.deadLetterBefore.getTime())
    );
  };

  it('deleted only rows past the period, and the next run finishes the work exactly', async () => {
    await generateHistory(database.db, { projects: 2, webhooksPerProject: 5, deliveries: 12_000, fanOut: 3, spanDays: 60 });
    const initial = await deliveryRows();

    const child = spawnCli(['retention', 'run', '--older-than', '30d', '--batch-size', '40'], database.cliEnv);
    const exited = once(child, 'exit');
    for (;;) {
      const [row] = await queryRows<{ count: number }>(database.db, sql`select count(*)::int as count from deliveries`);
      if (row!.count < initial.length) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    child.kill('SIGKILL');
    const killedAt = new Date();
    const [, signal] = (await exited) as [number | null, string | null];
    expect(signal).toBe('SIGKILL');

    const survivors = new Set((await deliveryRows()).map((row) => row.id));
    const deleted = initial.filter((row) => !survivors.has(row.id));
    const upperBound = sweepCutoffs(killedAt, 30 * DAY_MS);
    expect(deleted.length).toBeGreaterThan(0);
    expect(deleted.every((row) => pastRetention(row, upperBound))).toBe(true);
    expect(initial.filter((row) => survivors.has(row.id) && pastRetention(row, upperBound)).length).toBeGreaterThan(0);

    const finish = await runCli(['retention', 'run', '--older-than', '30d', '--json'], database.cliEnv);
    expect(finish.code).toBe(0);
    const report = JSON.parse(finish.stdout);
    const cutoffs = { now: new Date(), before: new Date(report.before), deadLetterBefore: new Date(report.dead_letter_before) };
    const remaining = (await deliveryRows()).map((row) => row.id).sort();
    expect(remaining).toEqual(initial.filter((row) => !pastRetention(row, cutoffs)).map((row) => row.id).sort());
    expect(deleted.length + report.deleted.deliveries).toBe(initial.length - remaining.length);
    // No event past the period is left without a delivery; none with a delivery is gone.
    const events = await eventRows();
    expect(events.filter((event) => event.deliveries === 0 && new Date(event.created_at) < cutoffs.before)).toEqual([]);
    const [orphaned] = await queryRows<{ orphans: number }>(
      database.db,
      sql`select count(*)::int as orphans from deliveries where not exists (select 1 from events where events.id = deliveries.event_id)`,
    );
    expect(orphaned!.orphans).toBe(0);
  }, 180_000);
});

describe('the retention sweep erases replaced signing secrets past their grace period', () => {
  it('erases the expired ones, in batches, and keeps those still signing', async () => {
    const { db } = database;
    const { webhookIds } = await seedProject(db, box, 3);
    const at = new Date();
    for (const [index, id] of webhookIds.entries()) {
      await rotateWebhookSecret(db, box, id, { secret: `whsec_new${index}`, gracePeriodSeconds: 60, at: new Date(at.getTime() - (index === 2 ? 0 : 120_000)) });
    }
    const result = await sweepAll(db, sweepCutoffs(at, 30 * DAY_MS), { batchSize: 1 });
    expect(result.previousSecrets).toBe(2);
    const rows = await db.select().from(webhooks).where(inArray(webhooks.id, webhookIds)).orderBy(webhooks.id);
    expect(rows.map((row) => row.previousSecretSealed === null)).toEqual([true, true, false]);
    expect(openWebhookSigningSecrets(box, rows[2]!, at)).toEqual(['whsec_new2', 'whsec_test']);
    expect((await sweepAll(db, sweepCutoffs(at, 30 * DAY_MS))).previousSecrets).toBe(0);
  });
});
