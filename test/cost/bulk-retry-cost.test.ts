/**
 * What a step of a bulk retry costs its database, counted: the same statements and one
 * transaction whatever the number of deliveries it retries (one transaction queues them, one
 * statement marks them retried), so a higher BULK_RETRY_RATE costs no statement more per step.
 * The budget is written below; a change that adds a statement fails here until it is raised, in
 * the same commit, with the reason.
 *
 * Statements are counted on the wire (postgres.js), so this file runs against PostgreSQL only.
 */
import { inArray } from 'drizzle-orm';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperationActivities, type StepResult } from '../../activities/operations.ts';
import { createRetryOperation, findOperation, type OperationView } from '../../src/db/queries/operations.ts';
import { deliveries } from '../../src/db/schema.ts';
import { databaseKind } from '../support/database.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { StatementCounter } from '../support/statement-counter.ts';
import { storedProject, webhookWithDeliveries } from '../support/stored-deliveries.ts';

/**
 * A step: the operation, its webhook and the project's running operations read; its next items
 * read; the matched ones queued (one transaction: the deliveries moved back to pending, the
 * items marked queued); the signalled ones marked retried.
 */
const STEP_BUDGET = { statements: 7, transactions: 1 };

const onPostgres = databaseKind === 'postgres';
const counter = new StatementCounter();
let h: Harness;

beforeAll(async () => {
  if (!onPostgres) return;
  // No worker: the workflows the steps signal wait on the task queue, and nothing is sent while counted.
  h = await startHarness({ database: { onStatement: counter.record } });
});
afterAll(async () => {
  await h?.stop();
});

describe.skipIf(!onPostgres)('the cost of a bulk retry step', () => {
  it('is the same few statements and one transaction for a step of 2 deliveries as for one of 8', async () => {
    const project = await storedProject(h.db, `prj_cost_${Date.now().toString(36)}`);
    const { webhookId, ids } = await webhookWithDeliveries(h.db, h.secretBox, project, { url: 'https://example.com/bulk-cost', count: 18 });
    await h.db.update(deliveries).set({ status: 'dead_letter', attemptCount: 5 }).where(inArray(deliveries.id, ids));
    const operation = (await createRetryOperation(h.db, { projectId: project.projectId, webhookId, statuses: ['dead_letter'], until: new Date() }, 3)) as OperationView;
    const { retryOperationStep } = createOperationActivities({ db: h.db, scheduler: h.scheduler, logger: h.logger });
    const step = (ratePerSecond: number) => new MockActivityEnvironment().run(retryOperationStep, { operationId: operation.id, ratePerSecond }) as Promise<StepResult>;

    // The first step also selects the operation's page of deliveries: not a steady step.
    expect(await step(8)).toMatchObject({ done: false, retried: 8 });
    const counted: Array<{ step: StepResult; statements: number; transactions: number }> = [];
    for (const rate of [8, 2]) {
      counter.take();
      const result = await step(rate);
      counted.push({ step: result, ...counter.take() });
    }
    console.info(`cost of a bulk retry step: ${JSON.stringify(counted)}`);

    expect(counted.map(({ step }) => step.retried)).toEqual([8, 2]);
    for (const { statements, transactions } of counted) {
      expect(statements, `statements of a step (budget ${STEP_BUDGET.statements})`).toBeLessThanOrEqual(STEP_BUDGET.statements);
      expect(transactions, `transactions of a step (budget ${STEP_BUDGET.transactions})`).toBeLessThanOrEqual(STEP_BUDGET.transactions);
    }
    expect(counted[0]!.statements).toBe(counted[1]!.statements);
    expect(await findOperation(h.db, webhookId, operation.id)).toMatchObject({ matched: 18, retried: 18, skipped: 0 });
  }, 60_000);
});
