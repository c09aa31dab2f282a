/**
 * Time limits of one send attempt, shared by the workflow (the activity's timeouts) and the
 * configuration (the largest DELIVERY_TIMEOUT_MS it accepts), so that they agree for every
 * allowed value.
 */

/** DELIVERY_TIMEOUT_MS when it is not set. */
export const DEFAULT_DELIVERY_TIMEOUT_MS = 30_000;

/** The largest DELIVERY_TIMEOUT_MS the configuration accepts. */
export const MAX_DELIVERY_TIMEOUT_MS = 120_000;

/**
 * The send activity's start-to-close timeout: the longest HTTP exchange, plus time for its
 * database statements. A shorter DELIVERY_TIMEOUT_MS leaves more margin, never less.
 */
export const SEND_START_TO_CLOSE_MS = MAX_DELIVERY_TIMEOUT_MS + 30_000;

/**
 * The send activity heartbeats while its request is out: a worker that dies mid-attempt is
 * noticed after this long (not after the start-to-close timeout), and a cancellation (a manual
 * retry) reaches the running attempt.
 */
export const SEND_HEARTBEAT_TIMEOUT_MS = 10_000;

/**
 * How long a stopping worker waits for its sends: the longest exchange (DELIVERY_TIMEOUT_MS),
 * and 5 s more to record their outcomes. Whatever stops a worker must give it at least this.
 */
export const workerDrainMs = (deliveryTimeoutMs: number): number => deliveryTimeoutMs + 5_000;
