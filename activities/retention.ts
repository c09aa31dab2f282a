import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import type { Metrics } from '../src/metrics.ts';
import { pacedSweepBatch, sweepCutoffs, type SweepPosition } from '../src/retention/sweep.ts';

/** What the retention activities need. */
export interface RetentionActivityDeps {
  db: Database;
  logger: Logger;
  metrics: Metrics;
  /** This worker's RETENTION_PERIOD. */
  retentionMs: number;
}

/** Creates the retention sweep's activity (the dependency-injection pattern). */
export function createRetentionActivities({ db, logger, metrics, retentionMs }: RetentionActivityDeps) {
  return {
    /**
     * One paced batch of the sweep at `position`, with cutoffs from the sweep's fixed "now".
     * Idempotent. It keeps what the schedule's period or this worker's keeps: each worker that
     * starts writes its period into the schedule, so during a rollout that changes the period, a
     * replica of the other setting may have written the schedule last. Data one of them keeps is
     * never deleted; a shortened period applies once the workers with it own the schedule.
     */
    async sweepRetentionBatch(input: { nowIso: string; olderThanMs: number; batchSize: number; position: SweepPosition }) {
      const olderThanMs = Math.max(input.olderThanMs, retentionMs);
      const step = await pacedSweepBatch(db, sweepCutoffs(new Date(input.nowIso), olderThanMs), input.position, input.batchSize);
      metrics.retentionDeleted.inc({ kind: 'deliveries' }, step.deliveries);
      metrics.retentionDeleted.inc({ kind: 'events' }, step.events);
      metrics.retentionDeleted.inc({ kind: 'previous_secrets' }, step.previousSecrets);
      if (step.deliveries + step.events + step.previousSecrets > 0) {
        logger.info({ deliveries: step.deliveries, events: step.events, previousSecrets: step.previousSecrets }, 'retention sweep deleted a batch');
      }
      return step;
    },
  };
}

/** The retention activities as the workflow sees them. */
export type RetentionActivities = ReturnType<typeof createRetentionActivities>;
