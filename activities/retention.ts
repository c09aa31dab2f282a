import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import type { Metrics } from '../src/metrics.ts';
import { sweepBatch, sweepCutoffs, sweepDone } from '../src/retention/sweep.ts';

/** What the retention activities need. */
export interface RetentionActivityDeps {
  db: Database;
  logger: Logger;
  metrics: Metrics;
}

/** Creates the retention sweep's activity (the dependency-injection pattern). */
export function createRetentionActivities({ db, logger, metrics }: RetentionActivityDeps) {
  return {
    /** One batch of the sweep, with cutoffs from the sweep's fixed "now". Idempotent. */
    async sweepRetentionBatch(input: { nowIso: string; olderThanMs: number; batchSize: number }) {
      const counts = await sweepBatch(db, sweepCutoffs(new Date(input.nowIso), input.olderThanMs), input.batchSize);
      metrics.retentionDeleted.inc({ kind: 'deliveries' }, counts.deliveries);
      metrics.retentionDeleted.inc({ kind: 'events' }, counts.events);
      if (counts.deliveries + counts.events > 0) logger.info(counts, 'retention sweep deleted a batch');
      return { ...counts, done: sweepDone(counts, input.batchSize) };
    },
  };
}

/** The retention activities as the workflow sees them. */
export type RetentionActivities = ReturnType<typeof createRetentionActivities>;
