import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineSignal,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { DeliveryActivities } from '../activities/delivery.ts';
import { NON_RETRYABLE_REASONS } from './failure-types.ts';
import { DeliveryStatusAttribute, ProjectIdAttribute } from './search-attributes.ts';
import { SEND_HEARTBEAT_TIMEOUT_MS, SEND_START_TO_CLOSE_MS } from './send-limits.ts';

/** The retry policy of the signed send (spec 6.5): 1, 2, 4, 8 s between 5 attempts; delays in ms. */
export const DELIVERY_RETRY_POLICY = {
  initialInterval: 1_000,
  backoffCoefficient: 2,
  maximumAttempts: 5,
  maximumInterval: 300_000,
} as const;

/**
 * {@link DELIVERY_RETRY_POLICY} resumed at a round's `attempt`-th attempt (1: the whole policy).
 * An attempt that had to wait for its endpoint sent nothing and used up nothing: the round goes
 * on with a new activity whose policy continues the schedule where it stood.
 */
export function retryPolicyFrom(attempt: number): RetryPolicy {
  const { initialInterval, backoffCoefficient, maximumAttempts, maximumInterval } = DELIVERY_RETRY_POLICY;
  return {
    initialInterval: Math.min(initialInterval * backoffCoefficient ** (attempt - 1), maximumInterval),
    backoffCoefficient,
    maximumInterval,
    maximumAttempts: maximumAttempts - (attempt - 1),
  };
}

/** How long a dead-lettered delivery's workflow stays open waiting for a manual retry: 7 days, in ms. */
export const DEAD_LETTER_WAIT_MS = 7 * 24 * 60 * 60 * 1000;

/** Input of {@link deliveryWorkflow}: identifiers only, never secrets or event data. */
export interface DeliveryWorkflowInput {
  deliveryId: string;
  /** Keys of the keyed retry signals already handled (carried across continue-as-new). */
  retryKeys?: string[];
  /** The attempt of the current round to go on with, when a run continued as new while it waited for its endpoint. */
  resumeAttempt?: number;
  /**
   * `DeliveryStatus` describes the workflow while it is open (`pending`, `dead_letter`) and is
   * not set again when it ends delivered or gone: each upsert is a billed Temporal Cloud action,
   * a third of a delivered delivery's. Every start and continue-as-new sets it; a run started
   * without it (by release 0.2.0, or before the field existed) sets the status as it ends, as its
   * history replays.
   */
  statusWhileOpen?: true;
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

/**
 * How long a delivery waits in line before asking again when its send result has no `recheckMs`:
 * release 0.2.0's activity answered `turn` alone and its workflow asked again after 5 minutes.
 * A history it recorded must replay with the same timer.
 */
const TURN_RECHECK_MS_OF_0_2_0 = 5 * 60 * 1000;

/** The patch under which a retry that interrupts a round may continue the workflow as new. */
const CONTINUE_AS_NEW_AFTER_INTERRUPT = 'continue-as-new-after-interrupt';

/** The patch under which a long wait in a round may continue the workflow as new (0.2.0 went on to its next attempt). */
const CONTINUE_AS_NEW_AFTER_WAIT = 'continue-as-new-after-wait';

/** The patch under which a turn signal ends a wait for a rate limit early (0.2.0 slept through it). */
const RATE_WAIT_ENDS_ON_TURN = 'rate-wait-ends-on-turn';

/**
 * The patch under which an attempt that fails after a retry signal asked to cancel it (its end
 * raced the cancellation) starts the new round, instead of ending the round in `dead_letter` first.
 */
const RETRY_OVER_FAILED_ATTEMPT = 'retry-over-failed-attempt';

/** How many handled retry keys a workflow remembers. */
const RETRY_KEYS_KEPT = 20;

/** Manual retry (operation 8, or a bulk retry): starts a new round of attempts at once. */
export const retrySignal = defineSignal<[RetryRequest?]>('retry');

/** A place at the endpoint is free for this delivery, which was waiting in line for one; or a new rate limit brought its start forward. */
export const sendTurnSignal = defineSignal('sendTurn');

/** The send activity for the round's `attempt`-th attempt on: one project's sends are dispatched fairly beside other projects'. */
function sendFrom(attempt: number, projectId: string | undefined) {
  return proxyActivities<DeliveryActivities>({
    startToCloseTimeout: SEND_START_TO_CLOSE_MS,
    heartbeatTimeout: SEND_HEARTBEAT_TIMEOUT_MS,
    retry: retryPolicyFrom(attempt),
    // A manual retry cancels the running attempt and waits for it to end: never two at once.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    ...(projectId ? { priority: { fairnessKey: projectId } } : {}),
  }).sendDelivery;
}

const { markDeadLetter } = proxyLocalActivities<DeliveryActivities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/**
 * One delivery: runs rounds of signed-send attempts under {@link DELIVERY_RETRY_POLICY}
 * until one succeeds. An attempt that finds its endpoint busy waits (for {@link sendTurnSignal},
 * or the time its rate limit gives) and the round goes on. After a round's last failure the
 * delivery is `dead_letter` and the workflow waits for {@link retrySignal}; a retry signal
 * during a round ends it (a running attempt is cancelled first) and starts a new one.
 */
export async function deliveryWorkflow(input: DeliveryWorkflowInput): Promise<DeliveryWorkflowResult> {
  const { deliveryId } = input;
  const projectId = workflowInfo().typedSearchAttributes.get(ProjectIdAttribute);
  let retryRequested = false;
  let turnGiven = false;
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
  setHandler(sendTurnSignal, () => {
    turnGiven = true;
  });

  let resumeAttempt = input.resumeAttempt ?? 1;
  // What a continued run starts from: a new history, so it takes the new code's choices.
  const continued = (resume?: number): DeliveryWorkflowInput => ({
    deliveryId,
    retryKeys,
    statusWhileOpen: true,
    ...(resume !== undefined && { resumeAttempt: resume }),
  });
  const runRound = async (): Promise<'delivered' | 'gone'> => {
    for (let attempt = resumeAttempt; ; ) {
      turnGiven = false;
      const result = await sendFrom(attempt, projectId)(deliveryId, { attemptsBefore: attempt - 1 });
      if (typeof result === 'string') return result;
      attempt = result.attempt;
      if (result.wait === 'turn') await condition(() => turnGiven, result.recheckMs ?? TURN_RECHECK_MS_OF_0_2_0);
      // A new rate limit may bring a start forward: the turn signal ends the wait early.
      else if (result.wait === 'rate' && patched(RATE_WAIT_ENDS_ON_TURN)) await condition(() => turnGiven, result.waitMs);
      else await sleep(result.waitMs);
      // A long wait at a busy endpoint grows the history one wait at a time. (The patch is asked
      // only when it applies, so a history that never grows this long carries no marker.)
      if (workflowInfo().continueAsNewSuggested && patched(CONTINUE_AS_NEW_AFTER_WAIT)) {
        await continueAsNew<typeof deliveryWorkflow>(continued(attempt));
      }
    }
  };

  for (;; resumeAttempt = 1) {
    retryRequested = false;
    round = new CancellationScope();
    let outcome: DeliveryWorkflowResult | 'interrupted';
    try {
      outcome = await round.run(runRound);
    } catch (error) {
      if (isCancellation(error) && retryRequested) {
        outcome = 'interrupted';
      } else if (error instanceof ActivityFailure && retryRequested && patched(RETRY_OVER_FAILED_ATTEMPT)) {
        // The attempt failed before its cancellation reached it (the server does not retry an
        // activity asked to cancel): the round is over, and the retry asked for starts the next.
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

    if (outcome === 'interrupted') {
      // Retries that keep interrupting rounds grow one history: it continues as new as a long
      // wait does. The patch keeps open runs of the previous release replaying as they ran.
      if (workflowInfo().continueAsNewSuggested && patched(CONTINUE_AS_NEW_AFTER_INTERRUPT)) {
        return continueAsNew<typeof deliveryWorkflow>(continued());
      }
      continue;
    }
    if (outcome !== 'dead_letter') {
      if (!input.statusWhileOpen) upsertSearchAttributes([{ key: DeliveryStatusAttribute, value: outcome }]);
      return outcome;
    }
    upsertSearchAttributes([{ key: DeliveryStatusAttribute, value: outcome }]);

    if (!(await condition(() => retryRequested, DEAD_LETTER_WAIT_MS))) return 'dead_letter';
    upsertSearchAttributes([{ key: DeliveryStatusAttribute, value: 'pending' }]);
    if (workflowInfo().continueAsNewSuggested) {
      return continueAsNew<typeof deliveryWorkflow>(continued());
    }
  }
}
