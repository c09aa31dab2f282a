/**
 * A bulk retry signals its webhook's deliveries no faster than their sends may start: each case
 * sets what paces the webhook's starts (as `acquire_send_places` spaces them) and reads the pace
 * a step takes.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectLimits } from '../../src/db/queries/limits.ts';
import { createRetryOperation, findOperationById } from '../../src/db/queries/operations.ts';
import { findWebhook } from '../../src/db/queries/webhooks.ts';
import { webhooks } from '../../src/db/schema.ts';
import { sendPaceOf, type PaceSettings } from '../../src/operations/pace.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';

const SETTINGS: PaceSettings = { probeIntervalMs: 2_000, recoveryRate: 3 };
let database: SharedTestDatabase;
let projects = 0;

beforeAll(async () => {
  database = await openSharedTestDatabase();
});
afterAll(async () => {
  await database?.close();
});

/** The pace of a bulk retry of a new webhook's dead letters since `since`, with the webhook's columns set to `state`, shared by `runningOperations`. */
async function paceOf(state: Partial<typeof webhooks.$inferInsert>, { since, runningOperations = 1, projectRecoveryRate }: { since?: Date; runningOperations?: number; projectRecoveryRate?: number } = {}) {
  const db = database.db;
  const project = await storedProject(db, `proj_pace_${process.pid}_${(projects += 1)}`);
  if (projectRecoveryRate !== undefined) await setProjectLimits(db, project.projectId, { recoveryRate: projectRecoveryRate });
  const { webhookId } = await webhookWithDeliveries(db, new SecretBox(generateEncryptionKey()), project, { url: 'https://127.0.0.1:1/hooks', count: 0 });
  if (Object.keys(state).length > 0) await db.update(webhooks).set(state).where(eq(webhooks.id, webhookId));
  const created = await createRetryOperation(db, { projectId: project.projectId, webhookId, statuses: ['dead_letter'], since, until: new Date() }, 10);
  if (!('id' in created)) throw new Error('the operation was not created');
  const operation = (await findOperationById(db, created.id))!;
  const webhook = (await findWebhook(db, webhookId))!;
  return sendPaceOf(db, { operation, webhook }, SETTINGS, runningOperations);
}

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000);

describe("a bulk retry's pace", () => {
  it('is not limited when nothing paces the webhook', async () => {
    expect(await paceOf({})).toBe(Infinity);
  });

  it("is the webhook's rate_limit", async () => {
    expect(await paceOf({ rateLimit: 0.5 })).toBe(0.5);
  });

  it("is its open breaker's probes, or its rate_limit when slower", async () => {
    expect(await paceOf({ circuitOpenedAt: minutesAgo(1), rateLimit: 10 })).toBe(0.5);
    expect(await paceOf({ circuitOpenedAt: minutesAgo(1), rateLimit: 0.25 })).toBe(0.25);
  });

  it("is its project's recovery pace once its breaker has closed, shared by the project's running operations", async () => {
    expect(await paceOf({ circuitClosedAt: minutesAgo(1) })).toBe(3);
    expect(await paceOf({ circuitClosedAt: minutesAgo(1) }, { runningOperations: 2 })).toBe(1.5);
    expect(await paceOf({ circuitClosedAt: minutesAgo(1) }, { projectRecoveryRate: 8 })).toBe(8);
  });

  it("is not the recovery pace when the project's is 0 (not paced), or when the operation takes only deliveries made after the breaker closed", async () => {
    expect(await paceOf({ circuitClosedAt: minutesAgo(1) }, { projectRecoveryRate: 0 })).toBe(Infinity);
    expect(await paceOf({ circuitClosedAt: minutesAgo(10) }, { since: minutesAgo(5) })).toBe(Infinity);
  });
});
