import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { RetentionActivities } from '../activities/retention.ts';
import type { SweepCounts, SweepPosition, SweepStep } from '../src/retention/sweep.ts';

/** Input of {@link retentionSweepWorkflow}. */
export interface RetentionSweepInput {
  /** How old a row must be to go (RETENTION_PERIOD). */
  retentionMs: number;
  /** Rows per statement. */
  batchSize: number;
  /** The sweep's "now", fixed at its first run (carried across continue-as-new). */
  startedAtIso?: string;
  /** Deleted so far (carried across continue-as-new). */
  deleted?: Partial<SweepCounts>;
  /** Batches run so far (carried across continue-as-new). */
  batches?: number;
  /** Where the sweep goes on (carried across continue-as-new). */
  position?: SweepPosition;
}

/** What a sweep deleted, shown as the workflow's result in the Web UI. */
export interface RetentionSweepResult extends SweepCounts {
  startedAt: string;
  batches: number;
}

const { sweepRetentionBatch } = proxyActivities<RetentionActivities>({
  startToCloseTimeout: '2m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
});

/**
 * One run of the retention sweep (started by the Temporal Schedule every
 * RETENTION_SWEEP_INTERVAL): batches of deletions until nothing past the period is left. Each
 * batch is an activity, so a crash anywhere resumes with the next batch; large sweeps continue
 * as new to keep the history short.
 */
export async function retentionSweepWorkflow(input: RetentionSweepInput): Promise<RetentionSweepResult> {
  const startedAtIso = input.startedAtIso ?? new Date(Date.now()).toISOString();
  const deleted: SweepCounts = { deliveries: 0, events: 0, previousSecrets: 0, ...input.deleted };
  let batches = input.batches ?? 0;
  let position: SweepPosition | undefined = input.position ?? { phase: 'deliveries' };
  while (position) {
    const batch: SweepStep = await sweepRetentionBatch({ nowIso: startedAtIso, olderThanMs: input.retentionMs, batchSize: input.batchSize, position });
    batches += 1;
    deleted.deliveries += batch.deliveries;
    deleted.events += batch.events;
    // A batch recorded by a release before secrets were swept has no count of them.
    deleted.previousSecrets += batch.previousSecrets ?? 0;
    position = batch.next;
    if (position && (workflowInfo().continueAsNewSuggested || batches - (input.batches ?? 0) >= 500)) {
      return continueAsNew<typeof retentionSweepWorkflow>({ ...input, startedAtIso, deleted, batches, position });
    }
  }
  return { startedAt: startedAtIso, ...deleted, batches };
}
