import { CliError } from './output.ts';

/** A thin client of the v2 API for the CLI; every failure becomes one clear line. */
export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string | undefined,
  ) {}

  /** Calls `method path` under /api-gateway/v2 and returns the parsed body (undefined for 204). */
  async call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    if (!this.token) throw new CliError('no API token: pass --token or set WEBHOOKS_API_TOKEN');
    const url = `${this.baseUrl.replace(/\/$/, '')}/api-gateway/v2${path}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          Authorization: `Bearer ${this.token}`,
          ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (error) {
      throw new CliError(`cannot reach the service at ${this.baseUrl}: ${(error as Error).message} (is it running? set WEBHOOKS_API_URL)`);
    }
    if (response.status === 204) return undefined as T;
    const text = await response.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new CliError(`HTTP ${response.status} from ${url}: ${text.slice(0, 200)}`);
    }
    if (!response.ok) {
      const error = parsed?.error;
      throw new CliError(`${response.status} ${error?.code ?? 'error'}: ${error?.message ?? text}`);
    }
    return parsed as T;
  }
}

/** The key id a token belongs to (`sk_<id>_<secret>` → `key_<id>`), to default `api_key_id`. */
export function keyIdOfToken(token: string): string | undefined {
  const match = /^sk_([0-9a-z]{26})_/.exec(token);
  return match ? `key_${match[1]}` : undefined;
}

/** Parses repeated `--header Name=value` options into an object. */
export function parseHeaderOptions(values: string[] | undefined): Record<string, string> | undefined {
  if (!values || values.length === 0) return undefined;
  return Object.fromEntries(
    values.map((pair) => {
      const at = pair.indexOf('=');
      if (at <= 0) throw new CliError(`--header takes Name=value, got "${pair}"`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}
