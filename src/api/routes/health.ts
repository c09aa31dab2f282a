import { Hono } from 'hono';
import { pingDatabase } from '../../db/client.ts';
import type { AppEnv } from '../env.ts';

const CHECK_TIMEOUT_MS = 2_000;

async function check(name: string, probe: () => Promise<unknown>): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([probe(), timeout]);
    return undefined;
  } catch (error) {
    return `${name}: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    clearTimeout(timer);
  }
}

/** `GET /healthz` (the process answers) and `GET /readyz` (database and Temporal reachable). */
export const healthRouter = new Hono<AppEnv>()
  .get('/healthz', (c) => c.json({ status: 'ok' }))
  .get('/readyz', async (c) => {
    const { db, temporal } = c.var.deps;
    const failures = (
      await Promise.all([
        check('database', () => pingDatabase(db)),
        check('temporal', () =>
          temporal.connection.withDeadline(Date.now() + CHECK_TIMEOUT_MS, () =>
            temporal.workflowService.getSystemInfo({}),
          ),
        ),
      ])
    ).filter((failure) => failure !== undefined);
    if (failures.length > 0) {
      return c.json(
        {
          error: { code: 'service_unavailable', message: `not ready: ${failures.join('; ')}` },
          meta: { request_id: c.var.requestId },
        },
        503,
      );
    }
    return c.json({ status: 'ready', checks: { database: 'ok', temporal: 'ok' } });
  });
