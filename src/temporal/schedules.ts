/**
 * The service's periodic work, each a Temporal Schedule with one owner however many worker
 * replicas run: the retention sweep and the repair check. One schedule per task queue, so test
 * runs and deployments sharing a namespace do not meet.
 */
import {
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleOptionsAction,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import { SWEEP_BATCH_SIZE } from '../retention/sweep.ts';
import { repairWorkflow, type RepairInput } from '../../workflows/repair.ts';
import { retentionSweepWorkflow } from '../../workflows/retention.ts';

/**
 * Creates the schedule `scheduleId` that starts `action` every `intervalMs`, or brings an existing
 * one to these options (replicas starting together both do this; the second updates what the
 * first created). A run still going when the next is due is not doubled, and a missed run is not
 * made up beyond one interval.
 */
async function ensureSchedule(client: Client, scheduleId: string, intervalMs: number, action: ScheduleOptionsAction): Promise<void> {
  const spec = { intervals: [{ every: intervalMs }] };
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: intervalMs };
  try {
    await client.schedule.create({ scheduleId, spec, action, policies });
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    await client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, spec, action, policies: { ...previous.policies, ...policies } }));
  }
}

/** What the retention schedule runs, and how often. */
export interface RetentionScheduleOptions {
  taskQueue: string;
  retentionMs: number;
  intervalMs: number;
}

/** The retention sweep's schedule of a deployment. */
export const retentionScheduleId = (taskQueue: string) => `retention-sweep-${taskQueue}`;

/** Runs {@link retentionSweepWorkflow} every `intervalMs`. */
export async function ensureRetentionSchedule(client: Client, options: RetentionScheduleOptions): Promise<void> {
  const action: ScheduleOptionsStartWorkflowAction<typeof retentionSweepWorkflow> = {
    type: 'startWorkflow',
    workflowType: retentionSweepWorkflow,
    workflowId: `${retentionScheduleId(options.taskQueue)}-run`,
    taskQueue: options.taskQueue,
    args: [{ retentionMs: options.retentionMs, batchSize: SWEEP_BATCH_SIZE }],
    staticSummary: 'retention sweep: deletes deliveries, attempts and events past RETENTION_PERIOD',
  };
  await ensureSchedule(client, retentionScheduleId(options.taskQueue), options.intervalMs, action);
}

/** What the repair schedule runs, and how often. */
export interface RepairScheduleOptions extends RepairInput {
  taskQueue: string;
  intervalMs: number;
}

/** The repair check's schedule of a deployment. */
export const repairScheduleId = (taskQueue: string) => `delivery-repair-${taskQueue}`;

/** Runs {@link repairWorkflow} every `intervalMs`, whichever replica's worker takes it. */
export async function ensureRepairSchedule(client: Client, { taskQueue, intervalMs, undispatchedAfterMs, staleAfterMs }: RepairScheduleOptions): Promise<void> {
  const action: ScheduleOptionsStartWorkflowAction<typeof repairWorkflow> = {
    type: 'startWorkflow',
    workflowType: repairWorkflow,
    workflowId: `${repairScheduleId(taskQueue)}-run`,
    taskQueue,
    args: [{ undispatchedAfterMs, staleAfterMs }],
    staticSummary: 'repair check: starts undispatched events, and puts right deliveries their workflows would not move',
  };
  await ensureSchedule(client, repairScheduleId(taskQueue), intervalMs, action);
}
