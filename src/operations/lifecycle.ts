/**
 * What every part that runs or ends a bulk retry operation shares (its workflow's activities, the
 * API's cancellation, the repair check): the operation while it runs, a queued delivery's retry
 * signal, and the operation's end, which first signals every delivery it had queued.
 */
import type { Database } from '../db/client.ts';
import { finishOperation, findOperationById, markOperationItemRetried, operationItemsIn } from '../db/queries/operations.ts';
import { findWebhook } from '../db/queries/webhooks.ts';
import type { OperationRow, OperationStatus, WebhookRow } from '../db/schema.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';

/** What running and ending an operation need. */
export interface OperationDeps {
  db: Database;
  scheduler: DeliveryScheduler;
}

/** An operation that runs, with its webhook. */
export interface RunningOperation {
  operation: OperationRow;
  webhook: WebhookRow;
}

/** The operation and its webhook while it runs; undefined once either is gone or the operation has finished. */
export async function runningOperation(db: Database, operationId: string): Promise<RunningOperation | undefined> {
  const operation = await findOperationById(db, operationId);
  const webhook = operation && (await findWebhook(db, operation.webhookId));
  return operation && webhook && operation.status === 'running' ? { operation, webhook } : undefined;
}

/** Signals the workflow of a queued delivery (a retry keyed by the operation's id, which a workflow takes once), then marks it retried. */
export async function signalOperationRetry({ db, scheduler }: OperationDeps, { operation, webhook }: RunningOperation, item: { deliveryId: string; event: string }) {
  await scheduler.retry(
    { deliveryId: item.deliveryId, webhookId: webhook.id, projectId: webhook.projectId, event: item.event, url: webhook.url },
    operation.id,
  );
  await markOperationItemRetried(db, operation.id, item.deliveryId);
}

/**
 * Records how the operation ended (a finished operation keeps its first end), after signalling
 * every delivery it had queued and not yet signalled, so none is left `pending` without a
 * workflow that will send it. `onPage` runs after each page of signals (an activity heartbeats).
 * True when this call recorded the end, false when the operation had ended already.
 */
export async function endOperation(deps: OperationDeps, operationId: string, status: Exclude<OperationStatus, 'running'>, onPage: () => void = () => {}): Promise<boolean> {
  const running = await runningOperation(deps.db, operationId);
  if (running) {
    for (let queued = await operationItemsIn(deps.db, operationId, 'queued', 100); queued.length > 0; queued = await operationItemsIn(deps.db, operationId, 'queued', 100)) {
      for (const item of queued) await signalOperationRetry(deps, running, item);
      onPage();
    }
  }
  return finishOperation(deps.db, operationId, status);
}
