import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import { retentionSweepWorkflow } from '../../workflows/retention.ts';
import { SWEEP_BATCH_SIZE } from './sweep.ts';

/** What the schedule runs, and how often. */
export interface RetentionScheduleOptions {
  taskQueue: string;
  retentionMs: number;
  intervalMs: number;
}

/** The schedule of a deployment (one per task queue, so test runs and deployments sharing a namespace do not meet). */
export const retentionScheduleId = (taskQueue: string) => `retention-sweep-${taskQueue}`;

function action(options: RetentionScheduleOptions): ScheduleOptionsStartWorkflowAction<typeof retentionSweepWorkflow> {
  return {
    type: 'startWorkflow',
    workflowType: retentionSweepWorkflow,
    workflowId: `${retentionScheduleId(options.taskQueue)}-run`,
    taskQueue: options.taskQueue,
    args: [{ retentionMs: options.retentionMs, batchSize: SWEEP_BATCH_SIZE }],
    staticSummary: 'retention sweep: deletes deliveries, attempts and events past RETENTION_PERIOD',
  };
}

/**
 * Creates the Temporal Schedule that runs {@link retentionSweepWorkflow} every `intervalMs`, or
 * brings an existing one to these options (replicas starting together both do this; the second
 * updates what the first created). A sweep still running when the next is due is not doubled.
 */
export async function ensureRetentionSchedule(client: Client, options: RetentionScheduleOptions): Promise<void> {
  const spec = { intervals: [{ every: options.intervalMs }] };
  try {
    await client.schedule.create({
      scheduleId: retentionScheduleId(options.taskQueue),
      spec,
      action: action(options),
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: options.intervalMs },
    });
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    await client.schedule.getHandle(retentionScheduleId(options.taskQueue)).update((previous) => ({
      ...previous,
      spec,
      action: action(options),
      policies: { ...previous.policies, overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: options.intervalMs },
    }));
  }
}
