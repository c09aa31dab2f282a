/**
 * How fast a bulk retry may signal its webhook's deliveries: no faster than their sends may
 * start. A delivery signalled sooner starts no sooner; it only waits in its workflow for the
 * start it was given (a send activity, a timer and two workflow tasks more: two billed actions).
 */
import type { Database } from '../db/client.ts';
import { projectRecoveryRate } from '../db/queries/limits.ts';
import type { FlowLimits } from '../flow-control/places.ts';
import type { RunningOperation } from './lifecycle.ts';

/** What of the send capacity's settings paces a webhook's starts (the worker's). */
export type PaceSettings = Pick<FlowLimits, 'probeIntervalMs' | 'recoveryRate'>;

/**
 * The starts per second the operation's webhook gives its sends at most now, as
 * `acquire_send_places` spaces them (`Infinity`: not paced): its `rate_limit`; while its breaker
 * is open, its probes (CIRCUIT_BREAKER_PROBE_INTERVAL); once it has closed, for the deliveries
 * made before, its project's recovery pace (its own, or PROJECT_RECOVERY_RATE; read only then),
 * which the project's `runningOperations` share as they share BULK_RETRY_RATE.
 */
export async function sendPaceOf(db: Database, { operation, webhook }: RunningOperation, settings: PaceSettings, runningOperations: number): Promise<number> {
  const paces: number[] = [];
  if (webhook.rateLimit) paces.push(webhook.rateLimit);
  const probeMs = settings.probeIntervalMs ?? 0;
  if (webhook.circuitOpenedAt) {
    if (probeMs > 0) paces.push(1000 / probeMs);
  } else if (webhook.circuitClosedAt && (!operation.since || operation.since < webhook.circuitClosedAt)) {
    const rate = (await projectRecoveryRate(db, webhook.projectId)) ?? settings.recoveryRate;
    if (rate) paces.push(rate / Math.max(1, runningOperations));
  }
  return Math.min(Infinity, ...paces);
}
