import { ScheduleOverlapPolicy } from '@temporalio/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureRetentionSchedule, retentionScheduleId } from '../../src/temporal/schedules.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { seedPastEvent, seedProject, storedIds } from '../support/history.ts';

const DAY_MS = 86_400_000;
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ worker: true });
});
afterAll(async () => {
  await h?.client.schedule.getHandle(retentionScheduleId(h.taskQueue)).delete().catch(() => {});
  await h?.stop();
});

it('a Temporal Schedule runs the sweep as a workflow that deletes what is past the period', async () => {
  const now = new Date();
  const { projectId } = await seedProject(h.db, h.secretBox, 1);
  const old = await seedPastEvent(h.db, h.secretBox, projectId, now, 31, [{ status: 'delivered', updatedDaysAgo: 31, attempts: 2 }]);
  const young = await seedPastEvent(h.db, h.secretBox, projectId, now, 29, [{ status: 'delivered', updatedDaysAgo: 29 }]);
  const pending = await seedPastEvent(h.db, h.secretBox, projectId, now, 90, [{ status: 'pending', updatedDaysAgo: 90 }]);

  // Created once, then brought to new options by the next replica that starts: no error, one schedule.
  await ensureRetentionSchedule(h.client, { taskQueue: h.taskQueue, retentionMs: 60 * DAY_MS, intervalMs: 3_600_000 });
  await ensureRetentionSchedule(h.client, { taskQueue: h.taskQueue, retentionMs: 30 * DAY_MS, intervalMs: 6 * 3_600_000 });
  const schedule = h.client.schedule.getHandle(retentionScheduleId(h.taskQueue));
  const described = await schedule.describe();
  expect(described.spec.intervals).toMatchObject([{ every: 6 * 3_600_000 }]);
  expect(described.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
  expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'retentionSweepWorkflow', taskQueue: h.taskQueue });
  expect(described.action.type === 'startWorkflow' && described.action.args).toEqual([{ retentionMs: 30 * DAY_MS, batchSize: 1_000 }]);

  await schedule.trigger();
  let started: { workflowId: string; firstExecutionRunId: string } | undefined;
  for (let i = 0; i < 100 && !started; i += 1) {
    const action = (await schedule.describe()).info.recentActions[0]?.action;
    started = action?.type === 'startWorkflow' ? action.workflow : undefined;
    if (!started) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(started?.workflowId).toMatch(new RegExp(`^${retentionScheduleId(h.taskQueue)}-run`));
  const result = await h.client.workflow.getHandle(started!.workflowId).result();

  expect(result).toMatchObject({ deliveries: 1, events: 1, batches: 2 });
  const after = await storedIds(h.db);
  expect(after.deliveries).not.toContain(old.deliveryIds[0]);
  expect(after.events).not.toContain(old.eventId);
  expect(after.deliveries).toEqual(expect.arrayContaining([...young.deliveryIds, ...pending.deliveryIds]));
  expect(after.events).toEqual(expect.arrayContaining([young.eventId, pending.eventId]));
  const metrics = await h.metrics.registry.metrics();
  expect(metrics).toContain('webhook_retention_deleted_total{kind="deliveries"} 1');
}, 60_000);

it("keeps what the worker's own period keeps when the schedule was last written by a replica with a shorter one (a rollout)", async () => {
  // This worker runs with RETENTION_PERIOD 60d; a replica of the release before (30d) started last and wrote the schedule.
  const longer = await startHarness({ worker: true, retentionMs: 60 * DAY_MS });
  try {
    const now = new Date();
    const { projectId } = await seedProject(longer.db, longer.secretBox, 1);
    const kept = await seedPastEvent(longer.db, longer.secretBox, projectId, now, 40, [{ status: 'delivered', updatedDaysAgo: 40 }]);
    const old = await seedPastEvent(longer.db, longer.secretBox, projectId, now, 61, [{ status: 'delivered', updatedDaysAgo: 61 }]);
    await ensureRetentionSchedule(longer.client, { taskQueue: longer.taskQueue, retentionMs: 30 * DAY_MS, intervalMs: 3_600_000 });
    const schedule = longer.client.schedule.getHandle(retentionScheduleId(longer.taskQueue));
    try {
      await schedule.trigger();
      let workflowId: string | undefined;
      for (let i = 0; i < 100 && !workflowId; i += 1) {
        const action = (await schedule.describe()).info.recentActions[0]?.action;
        workflowId = action?.type === 'startWorkflow' ? action.workflow.workflowId : undefined;
        if (!workflowId) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await longer.client.workflow.getHandle(workflowId!).result()).toMatchObject({ deliveries: 1, events: 1 });
      const after = await storedIds(longer.db);
      expect(after.deliveries).toEqual(expect.arrayContaining(kept.deliveryIds));
      expect(after.deliveries).not.toContain(old.deliveryIds[0]);
    } finally {
      await schedule.delete().catch(() => {});
    }
  } finally {
    await longer.stop();
  }
}, 60_000);
