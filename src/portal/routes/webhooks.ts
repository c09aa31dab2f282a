import { Hono, type Context } from 'hono';
import { html } from 'hono/html';
import { z } from 'zod';
import { answered, portalApi, type AppFetch } from '../api.ts';
import { ApiRefusal } from '../errors.ts';
import type { PortalEnv } from '../env.ts';
import { keepSecretReveal, takeSecretReveal } from '../../db/queries/portal-sessions.ts';
import type { SecretReveal } from '../../db/sealing.ts';
import { PORTAL_BASE } from '../link.ts';
import { formValue, formValues, pageSession, redirectAfterChange, render } from '../pages.ts';
import { anyInFlight, deliveriesSection, deliveryPath, liveRegion, type DeliveryFilters } from '../views/deliveries.ts';
import type { Markup } from '../views/layout.ts';
import {
  confirmation,
  headersText,
  rotateSecretForm,
  secretReveal,
  webhookForm,
  webhookList,
  webhookPath,
  webhookSummary,
  type WebhookFormValues,
} from '../views/webhooks.ts';

const HOME = [{ href: PORTAL_BASE, label: 'Webhooks' }];

/** Custom headers from the form's text, one `Name: value` per line; the API checks names and values. */
function parseHeadersText(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
  text.split(/\r?\n/).forEach((line, index) => {
    if (line.trim() === '') return;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new ApiRefusal(400, 'invalid_request', `headers: line ${index + 1} must be "Name: value"`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  });
  return headers;
}

/** What an edit form says it loaded (its `loaded` field); anything else is no such record. */
const LoadedValuesSchema = z.object({
  url: z.string(),
  events: z.array(z.string()),
  status: z.enum(['active', 'disabled']).optional(),
  headers: z.string(),
  rateLimit: z.string(),
  standardWebhooks: z.boolean(),
});

function loadedValues(text: string): WebhookFormValues['loaded'] {
  if (text === '') return undefined;
  try {
    return LoadedValuesSchema.parse(JSON.parse(text));
  } catch {
    return undefined;
  }
}

function submittedValues(c: Context<PortalEnv>): WebhookFormValues {
  const status = formValue(c, 'status');
  return {
    url: formValue(c, 'url').trim(),
    events: formValues(c, 'events'),
    ...(status === 'active' || status === 'disabled' ? { status } : {}),
    headers: formValue(c, 'headers'),
    rateLimit: formValue(c, 'rate_limit').trim(),
    standardWebhooks: formValue(c, 'standard_webhooks') === 'true',
    loaded: loadedValues(formValue(c, 'loaded')),
  };
}

/** A textarea's text as browsers post it (CRLF) or as the page wrote it (LF), compared alike. */
const sameText = (a: string, b: string) => a.replace(/\r\n/g, '\n').trim() === b.replace(/\r\n/g, '\n').trim();

/**
 * The update an edit form asks for: every field with no record of what the page loaded, else only
 * those the customer changed.
 */
function changedFields(values: WebhookFormValues) {
  const was = values.loaded;
  const changed = {
    url: !was || values.url !== was.url,
    events: !was || [...values.events].sort().join() !== [...was.events].sort().join(),
    status: !was || values.status !== was.status,
    headers: !was || !sameText(values.headers, was.headers),
    rateLimit: !was || values.rateLimit !== was.rateLimit,
    standardWebhooks: !was || values.standardWebhooks !== was.standardWebhooks,
  };
  return {
    ...(changed.url && { url: values.url }),
    ...(changed.events && { events: values.events as ['docauth.completed'] }),
    ...(changed.status && values.status !== undefined && { status: values.status }),
    ...(changed.headers && { headers: parseHeadersText(values.headers) }),
    ...(changed.rateLimit && { rate_limit: rateLimitOf(values) }),
    ...(changed.standardWebhooks && { standard_webhooks: values.standardWebhooks }),
  };
}

/**
 * The form's rate limit for the API: empty is none (`null` clears it on an update); anything else
 * goes as a number, or as typed when it is not one, so that the API's own rule refuses it.
 */
function rateLimitOf(values: WebhookFormValues): number | null {
  if (values.rateLimit === '') return null;
  const number = Number(values.rateLimit);
  return (Number.isFinite(number) ? number : values.rateLimit) as number;
}

/** Runs a form's change; a 400 from the API shows the form again with its message and the customer's input. */
async function orFormAgain(change: () => Promise<Response>, formAgain: (message: string) => Response | Promise<Response>): Promise<Response> {
  try {
    return await change();
  } catch (error) {
    if (error instanceof ApiRefusal && error.status === 400) return formAgain(error.message);
    throw error;
  }
}

/**
 * The question before an endpoint change that cannot be undone: `form` gets the endpoint's URL,
 * where to post (`<endpoint>/<action>`) and where cancelling goes back to.
 */
async function questionPage(
  c: Context<PortalEnv>,
  appFetch: AppFetch,
  page: { title: string; action: string; form: (url: string, action: string, endpoint: string) => Markup },
) {
  const id = c.req.param('id')!;
  const { data: webhook } = await answered(portalApi(c, appFetch).GET('/api-gateway/v2/webhooks/{id}', { params: { path: { id } } }));
  return render(
    c,
    { title: page.title, breadcrumbs: [...HOME, { href: webhookPath(id), label: webhook.url }] },
    page.form(webhook.url, `${webhookPath(id)}/${page.action}`, webhookPath(id)),
  );
}

/** The project's endpoints, a page at a time. */
async function listPage(c: Context<PortalEnv>, appFetch: AppFetch): Promise<Response> {
  const startingAfter = c.req.query('starting_after') || undefined;
  // The API validates the cursor; a bad one is its 400 with its message.
  const { data, meta } = await answered(
    portalApi(c, appFetch).GET('/api-gateway/v2/webhooks', { params: { query: { ...(startingAfter && { starting_after: startingAfter }) } as { limit?: number } } }),
  );
  return render(c, { title: 'Webhook endpoints' }, webhookList(data, { startingAfter, nextCursor: meta.next_cursor }));
}

/**
 * After a change that made a signing secret: keeps it for the one page that shows it, and sends
 * the browser there (303), so that reloading that page repeats nothing and shows it no more.
 */
async function revealAfterChange(c: Context<PortalEnv>, reveal: SecretReveal): Promise<Response> {
  await keepSecretReveal(c.var.deps.db, c.var.deps.secretBox, c.var.session.id, reveal);
  return c.redirect(`${webhookPath(reveal.webhookId)}/secret`, 303);
}

/** A new signing secret, shown once; afterwards (a reload, the link shared), the endpoint's page says so. */
async function secretPage(c: Context<PortalEnv>): Promise<Response> {
  const id = c.req.param('id')!;
  const reveal = await takeSecretReveal(c.var.deps.db, c.var.deps.secretBox, c.var.session.id, id);
  if (!reveal) return redirectAfterChange(c, webhookPath(id), 'secret-shown');
  const title = reveal.change === 'created' ? 'Endpoint added' : 'Secret rotated';
  const breadcrumbs = reveal.change === 'created' ? HOME : [...HOME, { href: webhookPath(id), label: 'Endpoint' }];
  return render(c, { title, ...(reveal.notice && { notice: reveal.notice }), breadcrumbs }, secretReveal(id, reveal.secret));
}

/** The new endpoint's form posted: its secret shown once (on the page it redirects to), or the form again with the API's reason. */
async function createEndpoint(c: Context<PortalEnv>, appFetch: AppFetch): Promise<Response> {
  const values = submittedValues(c);
  return orFormAgain(
    async () => {
      const { data } = await answered(
        portalApi(c, appFetch).POST('/api-gateway/v2/webhooks', {
          body: {
            api_key_id: c.var.apiKey.id,
            url: values.url,
            events: values.events as ['docauth.completed'],
            headers: parseHeadersText(values.headers),
            ...(values.rateLimit !== '' && { rate_limit: rateLimitOf(values)! }),
            standard_webhooks: values.standardWebhooks,
          },
        }),
      );
      return revealAfterChange(c, { webhookId: data.id, secret: data.secret, change: 'created', notice: `Events now go to ${data.url}.` });
    },
    (message) => render(c, { title: 'Add endpoint', error: message, breadcrumbs: HOME }, webhookForm(pageSession(c), `${PORTAL_BASE}/webhooks`, values, 'Add endpoint', message), 400),
  );
}

/** One endpoint with its deliveries (filtered, a page at a time), refreshed while any is in flight. */
async function endpointPage(c: Context<PortalEnv>, appFetch: AppFetch): Promise<Response> {
  const id = c.req.param('id')!;
  const filters: DeliveryFilters = {
    status: c.req.query('status') || undefined,
    event: c.req.query('event') || undefined,
    starting_after: c.req.query('starting_after') || undefined,
  };
  const api = portalApi(c, appFetch);
  const [{ data: webhook }, deliveries] = await Promise.all([
    answered(api.GET('/api-gateway/v2/webhooks/{id}', { params: { path: { id } } })),
    answered(
      api.GET('/api-gateway/v2/webhooks/{id}/deliveries', {
        // The API validates the filters; a bad one is its 400 with its message.
        params: { path: { id }, query: { limit: 25, ...filters } as { limit: number } },
      }),
    ),
  ]);
  return render(
    c,
    { title: webhook.url, breadcrumbs: HOME },
    liveRegion(
      'webhook',
      anyInFlight(deliveries.data),
      'Deliveries are in flight: this page refreshes every 3 seconds.',
      html`${webhookSummary(pageSession(c), webhook)}${deliveriesSection(pageSession(c), id, deliveries.data, filters, deliveries.meta.next_cursor)}`,
    ),
  );
}

/** The endpoint's settings in a form. */
async function editPage(c: Context<PortalEnv>, appFetch: AppFetch): Promise<Response> {
  const id = c.req.param('id')!;
  const { data: webhook } = await answered(portalApi(c, appFetch).GET('/api-gateway/v2/webhooks/{id}', { params: { path: { id } } }));
  const loaded = {
    url: webhook.url,
    events: webhook.events,
    status: webhook.status,
    headers: headersText(webhook.headers),
    rateLimit: webhook.rate_limit === undefined ? '' : String(webhook.rate_limit),
    standardWebhooks: webhook.standard_webhooks,
  };
  const values = { ...loaded, loaded };
  return render(
    c,
    { title: 'Edit endpoint', breadcrumbs: [...HOME, { href: webhookPath(id), label: webhook.url }] },
    webhookForm(pageSession(c), webhookPath(id), values, 'Save changes'),
  );
}

/** The edit form posted: back to the endpoint, or the form again with the API's reason. */
async function updateEndpoint(c: Context<PortalEnv>, appFetch: AppFetch): Promise<Response> {
  const id = c.req.param('id')!;
  const values = submittedValues(c);
  return orFormAgain(
    async () => {
      const body = changedFields(values);
      if (Object.keys(body).length > 0) {
        await answered(portalApi(c, appFetch).PATCH('/api-gateway/v2/webhooks/{id}', { params: { path: { id } }, body }));
      }
      return redirectAfterChange(c, webhookPath(id), 'updated');
    },
    (message) =>
      render(
        c,
        { title: 'Edit endpoint', error: message, breadcrumbs: [...HOME, { href: webhookPath(id), label: 'Endpoint' }] },
        webhookForm(pageSession(c), webhookPath(id), values, 'Save changes', message),
        400,
      ),
  );
}

/** The portal's endpoint pages: list, create, show (with its deliveries), edit, delete, rotate, test event. */
export function webhookPages(appFetch: AppFetch) {
  return new Hono<PortalEnv>()
    .get('/', (c) => listPage(c, appFetch))
    .get('/webhooks/new', (c) =>
      render(c, { title: 'Add endpoint', breadcrumbs: HOME }, webhookForm(pageSession(c), `${PORTAL_BASE}/webhooks`, { url: '', events: ['docauth.completed'], headers: '', rateLimit: '', standardWebhooks: false }, 'Add endpoint')),
    )
    .post('/webhooks', (c) => createEndpoint(c, appFetch))
    .get('/webhooks/:id', (c) => endpointPage(c, appFetch))
    .get('/webhooks/:id/secret', (c) => secretPage(c))
    .get('/webhooks/:id/edit', (c) => editPage(c, appFetch))
    .post('/webhooks/:id', (c) => updateEndpoint(c, appFetch))
    .get('/webhooks/:id/delete', (c) =>
      questionPage(c, appFetch, {
        title: 'Delete endpoint',
        action: 'delete',
        form: (url, action, endpoint) =>
          confirmation(
            pageSession(c),
            action,
            `Delete the endpoint ${url}?`,
            'Its deliveries and their pending retries are deleted with it. This cannot be undone.',
            'Delete endpoint',
            endpoint,
          ),
      }),
    )
    .post('/webhooks/:id/delete', async (c) => {
      await answered(portalApi(c, appFetch).DELETE('/api-gateway/v2/webhooks/{id}', { params: { path: { id: c.req.param('id') } } }));
      return redirectAfterChange(c, PORTAL_BASE, 'deleted');
    })
    .get('/webhooks/:id/rotate-secret', (c) =>
      questionPage(c, appFetch, {
        title: 'Rotate signing secret',
        action: 'rotate-secret',
        form: (url, action, endpoint) => rotateSecretForm(pageSession(c), action, url, endpoint),
      }),
    )
    .post('/webhooks/:id/rotate-secret', async (c) => {
      const id = c.req.param('id');
      // The API checks the value; a request without one (or 0) rotates with no grace period.
      const gracePeriod = Number(formValue(c, 'grace_period') || 0);
      const { data } = await answered(
        portalApi(c, appFetch).POST('/api-gateway/v2/webhooks/{id}/rotate-secret', {
          params: { path: { id } },
          ...(gracePeriod !== 0 && { body: { grace_period: gracePeriod } }),
        }),
      );
      const notice = data.previous_secret_expires_at ? `The previous secret also signs until ${data.previous_secret_expires_at}.` : undefined;
      return revealAfterChange(c, { webhookId: id, secret: data.secret, change: 'rotated', notice });
    })
    .post('/webhooks/:id/test-events', async (c) => {
      const id = c.req.param('id');
      const { data } = await answered(portalApi(c, appFetch).POST('/api-gateway/v2/webhooks/{id}/test-events', { params: { path: { id } } }));
      return redirectAfterChange(c, deliveryPath(id, data.delivery_id), 'test-sent');
    });
}
