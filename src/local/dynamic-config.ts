/**
 * Dynamic config the service relies on, on every Temporal server it runs against: the dev
 * server gets it by flag (src/local/dev-server.ts), the production server from
 * deploy/temporal/dynamicconfig/production.yaml (a test keeps the two equal).
 *
 * Eager activity dispatch: the first attempt of sendDelivery is handed to the worker in the
 * answer to the workflow task that schedules it, saving a task-queue round trip per delivery.
 * The SDK asks for it; the server grants it only with this on.
 *
 * Search attributes read from the cache: the CLI turns the server's default off for its dev
 * server (tests that add attributes see them at once), which costs every workflow about 13
 * database reads of cluster metadata and namespaces (26 -> 13 persistence operations per
 * delivery, docs/performance.md). The service registers its attributes before it starts
 * anything, so the cache is never stale for it.
 *
 * Fair dispatch: each delivery workflow and send activity carries its project as a fairness key; with these on
 * the matching service hands out the tasks of a backlog round-robin across keys instead of in
 * arrival order, so one project's burst does not queue another project's deliveries behind it
 * (docs/architecture.md, "Isolation").
 *
 * Timer horizon: the history service fires no timer before its timer queue's read horizon, which
 * it keeps this far ahead of now (1 s by default), so any timer under a second lasted about a
 * second. A bulk retry's wait for the rest of its step and a delivery's wait for its webhook's
 * rate limit are such timers (docs/performance.md, "The timer horizon").
 */
export const SERVICE_DYNAMIC_CONFIG: Readonly<Record<string, unknown>> = {
  'system.enableActivityEagerExecution': true,
  'system.forceSearchAttributesCacheRefreshOnRead': false,
  'matching.useNewMatcher': true,
  'matching.enableFairness': true,
  'history.timerProcessorMaxTimeShift': '100ms',
};
