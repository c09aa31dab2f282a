import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import { repairWorkflow, type RepairInput } from '../../workflows/repair.ts';

/**
 * How old an undispatched event must be before the check starts its workflows: its publish
 * request starts them within moments, and may still be doing so.
 */
export const UNDISPATCHED_AFTER_MS = 10_000;

/** What the repair schedule runs, and how often. */
export interface RepairScheduleOptions extends RepairInput {
  taskQueue: string;
  intervalMs: number;
}

/** The schedule of a deployment (one per task queue, so test runs and deployments sharing a namespace do not meet). */
export const repairScheduleId = (taskQueue: string) => `delivery-repair-${taskQueue}`;

function action({ taskQueue, undispatchedAfterMs, staleAfterMs }: RepairScheduleOptions): ScheduleOptionsStartWorkflowAction<typeof repairWorkflow> {
  return {
    type: 'startWorkflow',
    workflowType: repairWorkflow,
    workflowId: `${repairScheduleId(taskQueue)}-run`,
    taskQueue,
    args: [{ undispatchedAfterMs, staleAfterMs }],
    staticSummary: 'repair check: starts undispatched events, and puts right deliveries their workflows would not move',
  };
}

/**
 * Creates the Temporal Schedule that runs {@link repairWorkflow} every `intervalMs`, or brings an
 * existing one to these options (replicas starting together both do this; the second updates
 * what the first created). One run at a time, whichever replica's worker picks it up: a run still
 * going when the next is due is not doubled, and a missed run is not made up.
 */
export async function ensureRepairSchedule(client: Client, options: RepairScheduleOptions): Promise<void> {
  const spec = { intervals: [{ every: options.intervalMs }] };
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: options.intervalMs };
  try {
    await client.schedule.create({ scheduleId: repairScheduleId(options.taskQueue), spec, action: action(options), policies });
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    await client.schedule.getHandle(repairScheduleId(options.taskQueue)).update((previous) => ({
      ...previous,
      spec,
      action: action(options),
      policies: { ...previous.policies, ...policies },
    }));
  }
}
