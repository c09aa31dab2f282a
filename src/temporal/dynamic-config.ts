/**
 * Dynamic config the service relies on, on every Temporal server it runs against: the dev
 * server gets it by flag (src/temporal/dev-server.ts), the production server from
 * deploy/temporal/dynamicconfig/production.yaml (a test keeps the two equal).
 *
 * Eager activity dispatch: the first attempt of sendDelivery is handed to the worker in the
 * answer to the workflow task that schedules it, saving a task-queue round trip per delivery.
 * The SDK asks for it; the server grants it only with this on.
 */
export const SERVICE_DYNAMIC_CONFIG: Readonly<Record<string, unknown>> = {
  'system.enableActivityEagerExecution': true,
};
