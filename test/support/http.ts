/**
 * JSON over HTTP as the tests' clients see it: an answer (status, parsed body, time taken), or
 * why there was none. Never throws.
 */

export interface HttpAnswer {
  status: number;
  body: any;
  ms: number;
}

/** Why a call got no HTTP answer: refused (never reached the API), or sent and then no answer. */
export type NoAnswer = 'refused' | 'unanswered' | 'timeout';

function classify(error: unknown): NoAnswer {
  if (error instanceof DOMException && (error.name === 'TimeoutError' || error.name === 'AbortError')) return 'timeout';
  const cause = (error as { cause?: { code?: string } }).cause;
  if (cause?.code === 'ECONNREFUSED') return 'refused';
  return 'unanswered';
}

export async function call(
  url: string,
  init: { method?: string; token?: string; body?: unknown; timeoutMs?: number } = {},
): Promise<HttpAnswer | NoAnswer> {
  const started = Date.now();
  try {
    const response = await fetch(url, {
      method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
      headers: {
        ...(init.token ? { Authorization: `Bearer ${init.token}` } : {}),
        ...(init.body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(init.timeoutMs ?? 30_000),
    });
    const text = await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: response.status, body, ms: Date.now() - started };
  } catch (error) {
    return classify(error);
  }
}

/** True when `body` is the v2 error body: `{ error: { code, message }, meta: { request_id } }`. */
export function isV2ErrorBody(body: any): boolean {
  return (
    typeof body?.error?.code === 'string' &&
    typeof body?.error?.message === 'string' &&
    typeof body?.meta?.request_id === 'string'
  );
}
