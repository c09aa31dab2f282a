import { Hono } from 'hono';
import { pingDatabase } from '../../db/client.ts';
import type { AppEnv } from '../env.ts';
import { errorBody } from '../errors.ts';

const CHECK_TIMEOUT_MS = 2_000;

/** A dependency that did not answer, and why (the reason is logged, never returned). */
interface FailedCheck {
  dependency: string;
  error: unknown;
}

async function check(dependency: string, probe: () => Promise<unknown>): Promise<FailedCheck | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([probe(), timeout]);
    return undefined;
  } catch (error) {
    return { dependency, error };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (database and Temporal reachable, the
 * service's namespace there).
 * A 503 names the unreachable dependencies; their errors (hosts, driver messages) go to the log only.
 */
export const healthRouter = new Hono<AppEnv>()
  .get('/healthz', (c) => c.json({ status: 'ok' }))
  .get('/readyz', async (c) => {
    const { db, temporal } = c.var.deps;
    const failures = (
      await Promise.all([
        check('database', () => pingDatabase(db)),
        // The namespace, not only the server: with a namespace that does not exist (a typo, a
        // bootstrap not run) the server answers and every publish would fail.
        check('temporal', () =>
          temporal.connection.withDeadline(Date.now() + CHECK_TIMEOUT_MS, () =>
            temporal.workflowService.describeNamespace({ namespace: temporal.options.namespace }),
          ),
        ),
      ])
    ).filter((failure) => failure !== undefined);
    if (failures.length > 0) {
      for (const { dependency, error } of failures) c.var.logger.warn({ err: error, dependency }, 'not ready');
      const names = failures.map((failure) => failure.dependency).join(', ');
      return c.json(errorBody('service_unavailable', `not ready: ${names} unreachable`, c.var.requestId), 503);
    }
    return c.json({ status: 'ready', checks: { database: 'ok', temporal: 'ok' } });
  });
