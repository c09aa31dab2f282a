import { Context, heartbeat, sleep } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Database } from '../src/db/client.ts';
import {
  findOperationById,
  finishOperation,
  markOperationItemRetried,
  pendingOperationItems,
  queueOperationItem,
} from '../src/db/queries/operations.ts';
import { findWebhook } from '../src/db/queries/webhooks.ts';
import type { OperationStatus } from '../src/db/schema.ts';
import type { DeliveryScheduler } from '../src/temporal/scheduler.ts';

/** What the bulk operation activities need. */
export interface OperationActivityDeps {
  db: Database;
  scheduler: DeliveryScheduler;
  logger: Logger;
}

/** Creates the bulk retry operation's activities (the dependency-injection pattern). */
export function createOperationActivities({ db, scheduler, logger }: OperationActivityDeps) {
  return {
    /**
     * Handles the next `limit` deliveries of the operation: queues and signals each that is
     * still in one of its statuses, `ratePerSecond` at most, evenly spaced; skips the others.
     * A delivery queued by an earlier attempt of this page is signalled again (the keyed signal
     * is ignored if it arrived). `done` when nothing is left, or the operation (or its webhook)
     * is gone or finished. Stops between two deliveries when the operation is cancelled.
     */
    async retryOperationPage(input: { operationId: string; limit: number; ratePerSecond: number }) {
      const operation = await findOperationById(db, input.operationId);
      const webhook = operation && (await findWebhook(db, operation.webhookId));
      if (!operation || !webhook || operation.status !== 'running') return { done: true, retried: 0, skipped: 0 };
      const items = await pendingOperationItems(db, operation.id, input.limit);
      let retried = 0;
      let skipped = 0;
      const started = performance.now();
      for (const item of items) {
        if (Context.current().cancellationSignal.aborted) break;
        if (item.state === 'matched' && !(await queueOperationItem(db, operation.id, item.deliveryId, operation.statuses))) {
          skipped += 1;
          continue;
        }
        // Evenly spaced: the n-th signal of the page no earlier than n / rate seconds after its start.
        const due = started + (retried / input.ratePerSecond) * 1000 - performance.now();
        if (due > 0) await sleep(due);
        await scheduler.retry(
          { deliveryId: item.deliveryId, webhookId: webhook.id, projectId: webhook.projectId, event: item.event, url: webhook.url },
          operation.id,
        );
        await markOperationItemRetried(db, operation.id, item.deliveryId);
        retried += 1;
        heartbeat();
      }
      if (retried + skipped > 0) logger.info({ operationId: operation.id, webhookId: webhook.id, retried, skipped }, 'bulk retry page');
      return { done: items.length === 0, retried, skipped };
    },

    /** Records how the operation ended (a finished operation keeps its first end). */
    async finishOperation(operationId: string, status: Exclude<OperationStatus, 'running'>) {
      await finishOperation(db, operationId, status);
      logger.info({ operationId, status }, 'bulk retry operation finished');
    },
  };
}

/** The operation activities as the workflow sees them. */
export type OperationActivities = ReturnType<typeof createOperationActivities>;
