import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { ApiClient, keyIdOfToken, parseHeaderOptions } from './api-client.ts';
import { CliError, printTable } from './output.ts';

const CONNECTION_OPTIONS = {
  json: { type: 'boolean', default: false },
  token: { type: 'string' },
  'api-url': { type: 'string' },
} as const;

function client(config: Config, values: { token?: string | undefined; 'api-url'?: string | undefined }) {
  const token = values.token ?? config.cli.apiToken;
  return { api: new ApiClient(values['api-url'] ?? config.cli.apiUrl, token), token };
}

function required(value: string | undefined, what: string, usage: string): string {
  if (!value) throw new CliError(`${what} is required\n${usage}`);
  return value;
}

const WEBHOOKS_USAGE = `usage:
  webhooks list
  webhooks create --url <https url> [--events docauth.completed] [--header Name=value]... [--api-key-id <key id>]
  webhooks get <webhook id>
  webhooks update <webhook id> [--url <url>] [--events <e1,e2>] [--status active|disabled] [--header Name=value]...
  webhooks delete <webhook id>
  webhooks rotate-secret <webhook id>
options: --json, --token <API token> (or WEBHOOKS_API_TOKEN), --api-url <url> (or WEBHOOKS_API_URL)`;

/** `webhooks …`: the webhook operations of the v2 API. */
export async function webhooksCommand(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      ...CONNECTION_OPTIONS,
      url: { type: 'string' },
      events: { type: 'string' },
      status: { type: 'string' },
      header: { type: 'string', multiple: true },
      'api-key-id': { type: 'string' },
    },
  });
  const { api, token } = client(config, values);
  const id = () => required(positionals[0], 'a webhook id', WEBHOOKS_USAGE);
  const events = values.events?.split(',').map((event) => event.trim());
  const headers = parseHeaderOptions(values.header);
  let result: { data?: any; message?: string } | undefined;
  switch (action) {
    case 'list':
      result = await api.call('GET', '/webhooks');
      break;
    case 'create':
      result = await api.call('POST', '/webhooks', {
        api_key_id: values['api-key-id'] ?? (token && keyIdOfToken(token)),
        url: required(values.url, '--url', WEBHOOKS_USAGE),
        events: events ?? ['docauth.completed'],
        ...(headers ? { headers } : {}),
      });
      break;
    case 'get':
      result = await api.call('GET', `/webhooks/${encodeURIComponent(id())}`);
      break;
    case 'update':
      result = await api.call('PATCH', `/webhooks/${encodeURIComponent(id())}`, {
        ...(values.url ? { url: values.url } : {}),
        ...(events ? { events } : {}),
        ...(values.status ? { status: values.status } : {}),
        ...(headers ? { headers } : {}),
      });
      break;
    case 'delete':
      await api.call('DELETE', `/webhooks/${encodeURIComponent(id())}`);
      result = { data: { id: id(), deleted: true }, message: `Webhook ${id()} deleted.` };
      break;
    case 'rotate-secret':
      result = await api.call('POST', `/webhooks/${encodeURIComponent(id())}/rotate-secret`);
      break;
    default:
      throw new CliError(WEBHOOKS_USAGE);
  }
  if (values.json) {
    console.log(JSON.stringify(result?.data));
  } else if (Array.isArray(result?.data)) {
    printTable(result.data, ['id', 'url', 'events', 'status', 'success_count', 'failure_count', 'last_delivered_at']);
  } else {
    console.log(result?.message);
    console.log(JSON.stringify(result?.data, null, 2));
  }
}

const DELIVERIES_USAGE = `usage:
  deliveries list <webhook id> [--status <status>] [--event <event>] [--limit <1-100>] [--starting-after <delivery id>]
  deliveries get <webhook id> <delivery id>
  deliveries attempts <webhook id> <delivery id>
  deliveries retry <webhook id> <delivery id>
  deliveries retry <webhook id> --all [--status dead_letter,failed] [--since <ISO 8601>] [--until <ISO 8601>]
options: --json, --token <API token> (or WEBHOOKS_API_TOKEN), --api-url <url> (or WEBHOOKS_API_URL)`;

/** `deliveries …`: delivery inspection and manual retry. */
export async function deliveriesCommand(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      ...CONNECTION_OPTIONS,
      status: { type: 'string' },
      event: { type: 'string' },
      limit: { type: 'string' },
      'starting-after': { type: 'string' },
      all: { type: 'boolean', default: false },
      since: { type: 'string' },
      until: { type: 'string' },
    },
  });
  const { api } = client(config, values);
  const webhookId = encodeURIComponent(required(positionals[0], 'a webhook id', DELIVERIES_USAGE));
  const deliveryId = () => encodeURIComponent(required(positionals[1], 'a delivery id', DELIVERIES_USAGE));
  let result: { data?: any; message?: string; meta?: any };
  switch (action) {
    case 'list': {
      const query = new URLSearchParams();
      for (const [name, value] of [
        ['status', values.status],
        ['event', values.event],
        ['limit', values.limit],
        ['starting_after', values['starting-after']],
      ] as const) {
        if (value) query.set(name, value);
      }
      result = await api.call('GET', `/webhooks/${webhookId}/deliveries${query.size ? `?${query}` : ''}`);
      break;
    }
    case 'get':
      result = await api.call('GET', `/webhooks/${webhookId}/deliveries/${deliveryId()}`);
      break;
    case 'attempts':
      result = await api.call('GET', `/webhooks/${webhookId}/deliveries/${deliveryId()}/attempts`);
      break;
    case 'retry':
      if (values.all) {
        const body = {
          ...(values.status && { status: values.status.split(',').map((status) => status.trim()) }),
          ...(values.since && { since: values.since }),
          ...(values.until && { until: values.until }),
        };
        result = await api.call('POST', `/webhooks/${webhookId}/deliveries/retry`, body);
      } else {
        result = await api.call('POST', `/webhooks/${webhookId}/deliveries/${deliveryId()}/retry`);
      }
      break;
    default:
      throw new CliError(DELIVERIES_USAGE);
  }
  if (values.json) {
    console.log(JSON.stringify(result.data));
  } else if (action === 'list') {
    printTable(result.data, ['id', 'event', 'status', 'attempt_count', 'created_at', 'last_error', 'next_retry_at']);
    if (result.meta?.has_more) console.log(`more: --starting-after ${result.meta.next_cursor}`);
  } else if (action === 'attempts') {
    printTable(result.data, ['attempt_number', 'started_at', 'outcome', 'status_code', 'duration_ms', 'error']);
  } else {
    console.log(result.message);
    console.log(JSON.stringify(result.data, null, 2));
  }
}

const OPERATIONS_USAGE = `usage:
  operations get <webhook id> <operation id>
  operations cancel <webhook id> <operation id>
options: --json, --token <API token> (or WEBHOOKS_API_TOKEN), --api-url <url> (or WEBHOOKS_API_URL)`;

/** `operations …`: a bulk retry operation's progress, and cancelling it. */
export async function operationsCommand(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: CONNECTION_OPTIONS });
  const { api } = client(config, values);
  const webhookId = encodeURIComponent(required(positionals[0], 'a webhook id', OPERATIONS_USAGE));
  const operationId = encodeURIComponent(required(positionals[1], 'an operation id', OPERATIONS_USAGE));
  const path = `/webhooks/${webhookId}/operations/${operationId}`;
  let result: { data?: any; message?: string };
  if (action === 'get') result = await api.call('GET', path);
  else if (action === 'cancel') result = await api.call('DELETE', path);
  else throw new CliError(OPERATIONS_USAGE);
  if (values.json) {
    console.log(JSON.stringify(result.data));
  } else {
    console.log(result.message);
    console.log(JSON.stringify(result.data, null, 2));
  }
}
