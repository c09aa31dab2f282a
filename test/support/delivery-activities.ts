/**
 * The delivery activities, and the steps of one attempt, as the worker makes them, for tests that
 * call them directly: the database, the secret box, the sender, the send limits, how deliveries
 * are woken and how a send's end is reported are the test's; the rest is the worker's (a silent
 * logger, metrics of their own unless given, no traceparent sent, the endpoint-health rule, ten
 * sends in flight).
 */
import pino from 'pino';
import type { AttemptDeps } from '../../activities/attempt.ts';
import { createDeliveryActivities, type DeliveryActivityDeps } from '../../activities/delivery.ts';
import { createMetrics } from '../../src/metrics.ts';
import { SendsInFlight } from '../../src/delivery/sends-in-flight.ts';

/** Failures in a row that open an endpoint's circuit breaker. */
const BREAKER_THRESHOLD = 5;

/** What one attempt's steps (`prepareAttempt`, `sendAttempt`, `recordAttempt`) use, with the test's database, secrets and sender. */
export function attemptDepsFor(deps: Pick<AttemptDeps, 'db' | 'secretBox' | 'sender'>): AttemptDeps {
  return {
    db: deps.db,
    secretBox: deps.secretBox,
    sender: deps.sender,
    logger: pino({ level: 'silent' }),
    metrics: createMetrics(),
    sendTraceparent: false,
    breakerThreshold: BREAKER_THRESHOLD,
  };
}

/** {@link createDeliveryActivities} with the test's database, secrets, sender, limits, wake and completion. */
export function deliveryActivitiesFor(
  deps: Pick<DeliveryActivityDeps, 'db' | 'secretBox' | 'sender' | 'completion' | 'stopping'> &
    Partial<Pick<DeliveryActivityDeps, 'metrics'>> & {
      limits: DeliveryActivityDeps['flow']['limits'];
      wake: DeliveryActivityDeps['flow']['wake'];
    },
) {
  const { breakerThreshold, ...attempt } = attemptDepsFor(deps);
  return createDeliveryActivities({
    ...attempt,
    ...(deps.metrics && { metrics: deps.metrics }),
    autoDisable: { afterMs: 5 * 24 * 3_600_000, minDeadLetters: 10 },
    flow: { limits: deps.limits, breakerThreshold, wake: deps.wake },
    sends: new SendsInFlight(10),
    completion: deps.completion,
    stopping: deps.stopping,
    shutdownStarted: new AbortController().signal,
  });
}
