/**
 * A bulk retry operation is stored `running` before its workflow is started, and records its end
 * from that workflow. An API process that stops in between, or a workflow ended from outside (the
 * Web UI's terminate), leaves it `running` with no workflow to move it: its webhook could never
 * have another bulk retry, its project would count it against its limit, and the deliveries it
 * had queued would wait on it. This check finds such operations and puts them right.
 */
import type { Logger } from 'pino';
import type { Database } from '../db/client.ts';
import { listRunningOperations } from '../db/queries/operations.ts';
import type { Metrics } from '../metrics.ts';
import { endOperation } from '../operations/lifecycle.ts';
import type { DeliveryScheduler } from '../temporal/scheduler.ts';

/** Operations looked at per run, drawn at random from those running (each costs a `describe`). */
export const ORPHANED_OPERATIONS_BATCH = 100;

/** What the check did, by problem. */
export type OperationRepairs = Partial<Record<'operation_never_started' | 'operation_workflow_closed', number>>;

/**
 * Looks at up to `batch` of the operations `running` for more than `staleAfterMs` and repairs
 * those with no workflow running them:
 * - never started (its API process stopped first): started now, going on from what the database
 *   holds, as its request had asked;
 * - closed without recording its end: ended `failed`, after signalling the deliveries it had queued.
 */
export async function repairOrphanedOperations(
  deps: { db: Database; scheduler: DeliveryScheduler; logger: Logger; metrics: Metrics },
  staleAfterMs: number,
  batch = ORPHANED_OPERATIONS_BATCH,
): Promise<OperationRepairs> {
  const repairs: OperationRepairs = {};
  for (const operation of await listRunningOperations(deps.db, new Date(Date.now() - staleAfterMs), batch)) {
    const state = await deps.scheduler.operationWorkflowState(operation.id);
    if (state === 'running') continue;
    const problem = state === 'none' ? 'operation_never_started' : 'operation_workflow_closed';
    if (state === 'none') await deps.scheduler.startRetryOperation(operation);
    // A workflow that recorded its end an instant ago has closed too: nothing to repair.
    else if (!(await endOperation(deps, operation.id, 'failed'))) continue;
    repairs[problem] = (repairs[problem] ?? 0) + 1;
    deps.metrics.repairs.inc({ problem });
    deps.logger.warn({ operationId: operation.id, webhookId: operation.webhookId, problem }, 'repaired a bulk retry operation no workflow was running');
  }
  return repairs;
}
