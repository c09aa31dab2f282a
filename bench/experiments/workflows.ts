/**
 * Workflows of the Temporal experiment (bench/experiments/temporal-path.ts): the service's own
 * `deliveryWorkflow`, and a variant that runs the send as a local activity (one workflow task
 * per delivery instead of two, no activity task round trip through the server).
 */
import { proxyLocalActivities } from '@temporalio/workflow';
import type { DeliveryActivities } from '../../activities/delivery.ts';
import { DELIVERY_RETRY_POLICY, type DeliveryWorkflowInput } from '../../workflows/delivery.ts';
import { SEND_START_TO_CLOSE_MS } from '../../workflows/send-limits.ts';

export { deliveryWorkflow } from '../../workflows/delivery.ts';

const { sendDelivery } = proxyLocalActivities<DeliveryActivities>({
  startToCloseTimeout: SEND_START_TO_CLOSE_MS,
  retry: DELIVERY_RETRY_POLICY,
});

/** The happy path of deliveryWorkflow with the send as a local activity. */
export async function localDeliveryWorkflow(input: DeliveryWorkflowInput): Promise<string> {
  const outcome = await sendDelivery(input.deliveryId);
  // One receiver that answers at once: the endpoint always has a place free.
  if (typeof outcome !== 'string') throw new Error(`the send waited for its endpoint (${outcome.wait}); this experiment does not model waits`);
  return outcome;
}
