import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { parseDuration } from '../duration.ts';
import { answer, cliClient, keyIdOfToken, parseHeaderOptions } from './api-client.ts';
import type { components, operations } from '../client/index.ts';
import { printTable, UsageError, type Command } from './output.ts';

/** Fields of a webhook as the API takes them. */
type WebhookFields = components['schemas']['UpdateWebhook'];
/** Filters of the deliveries list. */
type DeliveryListQuery = NonNullable<operations['listDeliveries']['parameters']['query']>;
/** The body of a bulk retry. */
type BulkRetryBody = NonNullable<operations['retryDeliveries']['requestBody']>['content']['application/json'];

const CONNECTION_OPTIONS = {
  json: { type: 'boolean', default: false },
  token: { type: 'string' },
  'api-url': { type: 'string' },
} as const;

function client(config: Config, values: { token?: string | undefined; 'api-url'?: string | undefined }) {
  const token = values.token ?? config.cli.apiToken;
  return { api: cliClient(values['api-url'] ?? config.cli.apiUrl, token), token };
}

function required(value: string | undefined, what: string, usage: string): string {
  if (!value) throw new UsageError(`${what} is required\n${usage}`);
  return value;
}

const WEBHOOKS_USAGE = `usage:
  webhooks list [--limit <1-100>] [--starting-after <webhook id>]
  webhooks create --url <https url> [--events docauth.completed] [--header Name=value]... [--rate-limit <per second>] [--standard-webhooks true|false] [--api-key-id <key id>]
  webhooks get <webhook id>
  webhooks update <webhook id> [--url <url>] [--events <e1,e2>] [--status active|disabled] [--header Name=value]... [--rate-limit <per second>|none] [--standard-webhooks true|false]
  webhooks delete <webhook id>
  webhooks rotate-secret <webhook id> [--grace-period <duration: 90s, 30m, 24h, 7d>]
--header on update replaces every custom header of the webhook: repeat the ones to keep.
options: --json, --token <API token> (or WEBHOOKS_API_TOKEN), --api-url <url> (or WEBHOOKS_API_URL)`;

/** `webhooks …`: the webhook operations of the v2 API. */
export const webhooksCommand: Command = {
  usage: WEBHOOKS_USAGE,
  actions: ['list', 'create', 'get', 'update', 'delete', 'rotate-secret'],
  run: webhooks,
};

async function webhooks(config: Config, args: string[]): Promise<void> {
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
      'rate-limit': { type: 'string' },
      'standard-webhooks': { type: 'string' },
      'grace-period': { type: 'string' },
      'api-key-id': { type: 'string' },
      limit: { type: 'string' },
      'starting-after': { type: 'string' },
    },
  });
  // Every argument is checked before the client is built: a wrong command line is a usage error, token or not.
  const id = action === 'list' || action === 'create' ? undefined : required(positionals[0], 'a webhook id', WEBHOOKS_USAGE);
  const url = action === 'create' ? required(values.url, '--url', WEBHOOKS_USAGE) : values.url;
  const events = values.events?.split(',').map((event) => event.trim());
  const headers = parseHeaderOptions(values.header);
  // `none` removes the limit; any other text goes as a number (or as typed, for the service to refuse).
  const rateLimitOption = values['rate-limit'];
  const rateLimit = rateLimitOption === undefined ? undefined : rateLimitOption === 'none' ? null : Number.isFinite(Number(rateLimitOption)) ? Number(rateLimitOption) : (rateLimitOption as unknown as number);
  const standardWebhooksOption = values['standard-webhooks'];
  if (standardWebhooksOption !== undefined && standardWebhooksOption !== 'true' && standardWebhooksOption !== 'false') {
    throw new UsageError(`--standard-webhooks must be true or false\n${WEBHOOKS_USAGE}`);
  }
  const standardWebhooks = standardWebhooksOption === undefined ? {} : { standard_webhooks: standardWebhooksOption === 'true' };
  const gracePeriod = values['grace-period'];
  const graceMs = gracePeriod === undefined ? undefined : parseDuration(gracePeriod);
  if (gracePeriod !== undefined && graceMs === undefined) throw new UsageError(`--grace-period must be a duration such as 90s, 30m, 24h or 7d\n${WEBHOOKS_USAGE}`);
  const { api, token } = client(config, values);
  // list and create take no webhook id; the other actions were refused above without one.
  const path = { id: id! };
  let result: { data?: any; message?: string; meta?: any } | undefined;
  switch (action) {
    case 'list': {
      // The service validates the values and answers which one is wrong.
      const query = {
        ...(values.limit && { limit: Number(values.limit) }),
        ...(values['starting-after'] && { starting_after: values['starting-after'] }),
      };
      result = await answer(api.GET('/api-gateway/v2/webhooks', { params: { query } }));
      break;
    }
    case 'create':
      result = await answer(api.POST('/api-gateway/v2/webhooks', { body: {
        api_key_id: required(values['api-key-id'] ?? (token && keyIdOfToken(token)), '--api-key-id (the token does not name its key)', WEBHOOKS_USAGE),
        url: url!,
        // The service validates the values and answers which one is wrong.
        events: (events ?? ['docauth.completed']) as NonNullable<WebhookFields['events']>,
        ...(headers ? { headers } : {}),
        ...(rateLimit !== undefined && rateLimit !== null ? { rate_limit: rateLimit } : {}),
        ...standardWebhooks,
      } }));
      break;
    case 'get':
      result = await answer(api.GET('/api-gateway/v2/webhooks/{id}', { params: { path } }));
      break;
    case 'update':
      result = await answer(api.PATCH('/api-gateway/v2/webhooks/{id}', { params: { path }, body: {
        ...(url ? { url } : {}),
        ...(events ? { events: events as NonNullable<WebhookFields['events']> } : {}),
        ...(values.status ? { status: values.status as NonNullable<WebhookFields['status']> } : {}),
        ...(headers ? { headers } : {}),
        ...(rateLimit !== undefined ? { rate_limit: rateLimit } : {}),
        ...standardWebhooks,
      } }));
      break;
    case 'delete':
      await answer(api.DELETE('/api-gateway/v2/webhooks/{id}', { params: { path } }));
      result = { data: { id: path.id, deleted: true }, message: `Webhook ${path.id} deleted.` };
      break;
    default:
      // rotate-secret: the CLI runs only the actions the command lists
      result = await answer(api.POST('/api-gateway/v2/webhooks/{id}/rotate-secret', {
        params: { path },
        ...(graceMs !== undefined && { body: { grace_period: Math.ceil(graceMs / 1000) } }),
      }));
  }
  if (values.json) {
    // A list prints the API's page, `{ data, meta }`: meta.has_more and meta.next_cursor lead to the next one.
    console.log(JSON.stringify(action === 'list' ? result : result?.data));
  } else if (Array.isArray(result?.data)) {
    printTable(result.data, ['id', 'url', 'events', 'status', 'success_count', 'failure_count', 'last_delivered_at']);
    if (result.meta?.has_more) console.log(`more: --starting-after ${result.meta.next_cursor}`);
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
export const deliveriesCommand: Command = { usage: DELIVERIES_USAGE, actions: ['list', 'get', 'attempts', 'retry'], run: deliveries };

async function deliveries(config: Config, args: string[]): Promise<void> {
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
  const id = required(positionals[0], 'a webhook id', DELIVERIES_USAGE);
  const takesDeliveryId = action !== 'list' && !(action === 'retry' && values.all);
  const deliveryId = takesDeliveryId ? required(positionals[1], 'a delivery id', DELIVERIES_USAGE) : undefined;
  const { api } = client(config, values);
  const delivery = () => ({ path: { id, delivery_id: deliveryId! } });
  let result: { data?: any; message?: string; meta?: any };
  switch (action) {
    case 'list': {
      const query = {
        // The service validates the values and answers which one is wrong.
        ...(values.status && { status: values.status as NonNullable<DeliveryListQuery['status']> }),
        ...(values.event && { event: values.event as NonNullable<DeliveryListQuery['event']> }),
        ...(values.limit && { limit: Number(values.limit) }),
        ...(values['starting-after'] && { starting_after: values['starting-after'] }),
      };
      result = await answer(api.GET('/api-gateway/v2/webhooks/{id}/deliveries', { params: { path: { id }, query } }));
      break;
    }
    case 'get':
      result = await answer(api.GET('/api-gateway/v2/webhooks/{id}/deliveries/{delivery_id}', { params: delivery() }));
      break;
    case 'attempts':
      result = await answer(api.GET('/api-gateway/v2/webhooks/{id}/deliveries/{delivery_id}/attempts', { params: delivery() }));
      break;
    default: // retry
      if (values.all) {
        const body = {
          ...(values.status && { status: values.status.split(',').map((status) => status.trim()) as BulkRetryBody['status'] }),
          ...(values.since && { since: values.since }),
          ...(values.until && { until: values.until }),
        };
        result = await answer(api.POST('/api-gateway/v2/webhooks/{id}/deliveries/retry', { params: { path: { id } }, body }));
      } else {
        result = await answer(api.POST('/api-gateway/v2/webhooks/{id}/deliveries/{delivery_id}/retry', { params: delivery() }));
      }
  }
  if (values.json) {
    console.log(JSON.stringify(action === 'list' ? result : result.data));
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
export const operationsCommand: Command = { usage: OPERATIONS_USAGE, actions: ['get', 'cancel'], run: operations };

async function operations(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: CONNECTION_OPTIONS });
  const params = {
    path: {
      id: required(positionals[0], 'a webhook id', OPERATIONS_USAGE),
      operation_id: required(positionals[1], 'an operation id', OPERATIONS_USAGE),
    },
  };
  const { api } = client(config, values);
  const path = '/api-gateway/v2/webhooks/{id}/operations/{operation_id}';
  let result: { data?: any; message?: string };
  if (action === 'get') result = await answer(api.GET(path, { params }));
  else /* cancel */ result = await answer(api.DELETE(path, { params }));
  if (values.json) {
    console.log(JSON.stringify(result.data));
  } else {
    console.log(result.message);
    console.log(JSON.stringify(result.data, null, 2));
  }
}
