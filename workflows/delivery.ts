import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineSignal,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import { NON_RETRYABLE_REASONS } from './failure-types.ts';
import { DeliveryStatusAttribute } from './search-attributes.ts';

/** The retry policy of the signed send (spec 6.5): 1, 2, 4, 8 s between 5 attempts. */
export const DELIVERY_RETRY_POLICY = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumAttempts: 5,
  maximumInterval: '5m',
} as const;

/** How long a dead-lettered delivery's workflow stays open waiting for a manual retry: 7 days, in ms. */
export const DEAD_LETTER_WAIT_MS = 7 * 24 * 60 * 60 * 1000;

/** Input of {@link deliveryWorkflow}: identifiers only, never secrets or event data. */
export interface DeliveryWorkflowInput {
  deliveryId: string;
  /** Keys of the keyed retry signals already handled (carried across continue-as-new). */
  retryKeys?: string[];
}

/** How a delivery workflow ended. */
export type DeliveryWorkflowResult = 'delivered' | 'dead_letter' | 'gone';

/**
 * What a retry signal may carry: a key (the bulk retry operation's id) that makes it
 * idempotent: a second signal with a key already handled is ignored, so an operation resumed
 * after a crash can signal again without retrying twice.
 */
export interface RetryRequest {
  key?: string;
}

/** How many handled retry keys a workflow remembers. */
const RETRY_KEYS_KEPT = 20;

/** Manual retry (operation 8, or a bulk retry): starts a new round of attempts at once. */
export const retrySignal = defineSignal<[RetryRequest?]>('retry');

const { sendDelivery } = proxyActivities<Activities>({
  // The HTTP exchange is cut at 30 s by the activity itself; this leaves it time to record that.
  startToCloseTimeout: '40s',
  retry: DELIVERY_RETRY_POLICY,
  // A retry signal during backoff must not wait for a running attempt.
  cancellationType: ActivityCancellationType.TRY_CANCEL,
});

const { markDeadLetter } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/**
 * One delivery: runs rounds of signed-send attempts under {@link DELIVERY_RETRY_POLICY}
 * until one succeeds. After a round's last failure the delivery is `dead_letter` and the
 * workflow waits for {@link retrySignal}; a retry signal during backoff cuts the wait short.
 */
export async function deliveryWorkflow(input: DeliveryWorkflowInput): Promise<DeliveryWorkflowResult> {
  const { deliveryId } = input;
  let retryRequested = false;
  let round: CancellationScope | undefined;
  const retryKeys = input.retryKeys ?? [];
  setHandler(retrySignal, (request) => {
    if (request?.key) {
      if (retryKeys.includes(request.key)) return;
      retryKeys.push(request.key);
      if (retryKeys.length > RETRY_KEYS_KEPT) retryKeys.shift();
    }
    retryRequested = true;
    round?.cancel();
  });

  for (;;) {
    retryRequested = false;
    round = new CancellationScope();
    let outcome: DeliveryWorkflowResult | 'interrupted';
    try {
      outcome = await round.run(() => sendDelivery(deliveryId));
    } catch (error) {
      if (isCancellation(error) && retryRequested) {
        outcome = 'interrupted';
      } else if (error instanceof ActivityFailure && !isCancellation(error)) {
        const reason = error.cause instanceof ApplicationFailure && error.cause.type ? NON_RETRYABLE_REASONS[error.cause.type] : undefined;
        await markDeadLetter(deliveryId, reason);
        outcome = 'dead_letter';
      } else {
        throw error;
      }
    } finally {
      round = undefined;
    }

    if (outcome === 'interrupted') continue;
    upsertSearchAttributes([{ key: DeliveryStatusAttribute, value: outcome }]);
    if (outcome !== 'dead_letter') return outcome;

    if (!(await condition(() => retryRequested, DEAD_LETTER_WAIT_MS))) return 'dead_letter';
    upsertSearchAttributes([{ key: DeliveryStatusAttribute, value: 'pending' }]);
    if (workflowInfo().continueAsNewSuggested) {
      return continueAsNew<typeof deliveryWorkflow>({ ...input, retryKeys });
    }
  }
}
