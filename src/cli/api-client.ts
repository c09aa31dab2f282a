import { createWebhooksClient, type WebhooksClient } from '../client/index.ts';
import { CliError, UsageError } from './output.ts';

/** How long the CLI waits for one answer. */
const REQUEST_TIMEOUT_MS = 30_000;

/**
 * The generated, typed v2 client, for the CLI: it refuses to start without a token, and a
 * service it cannot reach becomes one clear line.
 */
export function cliClient(baseUrl: string, token: string | undefined): WebhooksClient {
  if (!token) throw new CliError('no API token: pass --token or set WEBHOOKS_API_TOKEN');
  return createWebhooksClient({
    baseUrl,
    token,
    fetch: (request) =>
      fetch(request, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).catch((error: Error) => {
        throw new CliError(`cannot reach the service at ${baseUrl}: ${error.message} (is it running? set WEBHOOKS_API_URL)`);
      }),
  });
}

/** The body of a call's answer, or the service's v2 error as one clear line (`404 not_found: …`). */
export async function answer<Data>(call: Promise<{ data?: Data; error?: unknown; response: Response }>): Promise<Data> {
  const result = await call;
  if (result.response.ok) return result.data as Data;
  const body = result.error as { error?: { code?: string; message?: string } } | string | undefined;
  const detail = typeof body === 'object' && body?.error ? `${body.error.code ?? 'error'}: ${body.error.message ?? ''}` : `error: ${String(body ?? '').slice(0, 200)}`;
  throw new CliError(`${result.response.status} ${detail}`);
}

/** The key id a token belongs to (`sk_<id>_<secret>` → `key_<id>`), to default `api_key_id`. */
export function keyIdOfToken(token: string): string | undefined {
  const match = /^sk_([0-9a-z]{26})_/.exec(token);
  return match ? `key_${match[1]}` : undefined;
}

/** Parses repeated `--header Name=value` options into an object; a usage error for one without `Name=`. */
export function parseHeaderOptions(values: string[] | undefined): Record<string, string> | undefined {
  if (!values || values.length === 0) return undefined;
  return Object.fromEntries(
    values.map((pair) => {
      const at = pair.indexOf('=');
      if (at <= 0) throw new UsageError(`--header takes Name=value, got "${pair}"`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}
