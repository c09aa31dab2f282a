import createClient from 'openapi-fetch';
import type { Context } from 'hono';
import type { AppEnv } from '../api/env.ts';
import type { ErrorBody } from '../api/errors.ts';
import type { WebhooksClient } from '../client/index.ts';
import type { paths } from '../client/schema.ts';
import type { PortalEnv } from './env.ts';
import { ApiRefusal, PortalError } from './errors.ts';

/** The service's own `fetch`, which the portal calls in process. */
export type AppFetch = (request: Request, env: AppEnv['Bindings']) => Response | Promise<Response>;

/**
 * The v2 API as the session's API key: every portal action is an API call, in process, so the
 * API's scoping, validation and error catalog apply unchanged. The portal's request id goes
 * along, so one id follows a click through both.
 */
export function portalApi(c: Context<PortalEnv>, appFetch: AppFetch): WebhooksClient {
  return createClient<paths>({
    baseUrl: new URL(c.req.url).origin,
    headers: { 'X-Request-Id': c.var.requestId },
    fetch: async (request: Request) => appFetch(request, { portalApiKey: c.var.apiKey }),
  });
}

/** The data of an API answer, or an {@link ApiRefusal} thrown with the API's own code and message. */
export async function answered<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (response.ok) return data as T;
  const body = error as Partial<ErrorBody> | undefined;
  if (response.status >= 500 || !body?.error) {
    throw new PortalError(503, 'The service could not answer', `Try again in a moment (request ${body?.meta?.request_id ?? 'unknown'}).`);
  }
  throw new ApiRefusal(response.status, body.error.code, body.error.message, response.headers.get('Retry-After') ?? undefined);
}
