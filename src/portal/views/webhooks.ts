import { html } from 'hono/html';
import type { components } from '../../client/schema.ts';
import { MAX_GRACE_PERIOD_SECONDS } from '../../api/schemas.ts';
import { EVENT_KINDS } from '../../events/schema.ts';
import { PORTAL_BASE } from '../link.ts';
import { badge, csrfField, postButton, timestamp, type Markup, type PageSession } from './layout.ts';

type Webhook = components['schemas']['Webhook'];
type WebhookListItem = components['schemas']['WebhookListItem'];

/** Where a webhook's pages are. */
export const webhookPath = (id: string) => `${PORTAL_BASE}/webhooks/${encodeURIComponent(id)}`;

/** The webhooks of the project, with the way to add one. */
export function webhookList(webhooks: WebhookListItem[], page: { startingAfter?: string | undefined; nextCursor?: string | undefined } = {}): Markup {
  const add = html`<p><a class="button primary" href="${PORTAL_BASE}/webhooks/new">Add endpoint</a></p>`;
  if (webhooks.length === 0 && !page.startingAfter) {
    return html`<p>No endpoints yet. Add the HTTPS address where your system should receive events.</p>${add}`;
  }
  const pages = html`<nav aria-label="Endpoint pages" class="pager">
    ${page.startingAfter ? html`<a href="${PORTAL_BASE}">First endpoints</a>` : ''}
    ${page.nextCursor ? html`<a href="${PORTAL_BASE}?starting_after=${page.nextCursor}" rel="next">More endpoints</a>` : ''}
  </nav>`;
  return html`${add}
<div class="table-wrap">
<table class="stack">
  <caption>Endpoints receiving this project's events</caption>
  <thead><tr><th scope="col">Endpoint</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Delivered</th><th scope="col">Failed attempts</th><th scope="col">Last delivery</th></tr></thead>
  <tbody>
  ${webhooks.map(
    (webhook) => html`<tr>
    <th scope="row" data-label="Endpoint"><a href="${webhookPath(webhook.id)}" class="url">${webhook.url}</a></th>
    <td data-label="Events">${webhook.events.join(', ')}</td>
    <td data-label="Status">${badge(webhook.status)}</td>
    <td data-label="Delivered">${webhook.success_count}</td>
    <td data-label="Failed attempts">${webhook.failure_count}</td>
    <td data-label="Last delivery">${timestamp(webhook.last_delivered_at)}</td>
  </tr>`,
  )}
  </tbody>
</table>
</div>
${page.startingAfter || page.nextCursor ? pages : ''}`;
}

/** What the endpoint form holds: the last submitted values, or the webhook's. */
export interface WebhookFormValues {
  url: string;
  events: string[];
  status?: 'active' | 'disabled';
  /** One `Name: value` per line. */
  headers: string;
  /** Deliveries per second, as typed; empty: no limit. */
  rateLimit: string;
  /** Also send the Standard Webhooks headers. */
  standardWebhooks: boolean;
  /**
   * An edit form's values as the page loaded them, sent back with the form: a save changes only
   * the fields the customer changed, not what the service or the API changed since (a status the
   * service set to disabled, a rate limit).
   */
  loaded?: Omit<WebhookFormValues, 'loaded'> | undefined;
}

/** Custom headers as the form's text: one `Name: value` per line. */
export const headersText = (headers: Record<string, string>) =>
  Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join('\n');

/** Names of the fields an API message blames (`url: must use https; events: ...`). */
function blamedFields(error: string | undefined): Set<string> {
  return new Set((error ?? '').split('; ').map((part) => part.split(/[.:]/, 1)[0]!.trim()));
}

/** The create or edit form of an endpoint. */
export function webhookForm(session: PageSession, action: string, values: WebhookFormValues, submitLabel: string, error?: string): Markup {
  const blamed = blamedFields(error);
  const invalid = (field: string) => (blamed.has(field) ? html` aria-invalid="true" aria-describedby="${field}-hint form-error"` : html` aria-describedby="${field}-hint"`);
  return html`<form method="post" action="${action}" class="stacked-form" novalidate>
  ${csrfField(session)}${values.loaded ? html`<input type="hidden" name="loaded" value="${JSON.stringify(values.loaded)}">` : ''}
  <div class="field">
    <label for="url">Endpoint URL</label>
    <input id="url" name="url" type="url" inputmode="url" autocomplete="url" required value="${values.url}"${invalid('url')}>
    <p class="hint" id="url-hint">An https:// address that accepts POST requests.</p>
  </div>
  <fieldset class="field"${blamed.has('events') ? html` aria-describedby="form-error"` : ''}>
    <legend>Events to send</legend>
    ${EVENT_KINDS.map(
      (kind) => html`<label class="check"><input type="checkbox" name="events" value="${kind}"${values.events.includes(kind) ? ' checked' : ''}> ${kind}</label>`,
    )}
    <p class="hint" id="events-hint">Pick at least one.</p>
  </fieldset>
  ${values.status
    ? html`<fieldset class="field">
    <legend>Status</legend>
    <label class="check"><input type="radio" name="status" value="active"${values.status === 'active' ? ' checked' : ''}> Active: events are sent</label>
    <label class="check"><input type="radio" name="status" value="disabled"${values.status === 'disabled' ? ' checked' : ''}> Disabled: nothing is sent</label>
  </fieldset>`
    : ''}
  <div class="field">
    <label for="headers">Custom headers <span class="optional">(optional)</span></label>
    <textarea id="headers" name="headers" rows="4" spellcheck="false"${invalid('headers')}>${values.headers}</textarea>
    <p class="hint" id="headers-hint">One per line, as <code>Name: value</code>. They are sent with every request.</p>
  </div>
  <div class="field">
    <label for="rate_limit">Rate limit <span class="optional">(optional)</span></label>
    <input id="rate_limit" name="rate_limit" type="text" inputmode="decimal" value="${values.rateLimit}"${invalid('rate_limit')}>
    <p class="hint" id="rate_limit-hint">Deliveries per second at most, such as 5 or 0.5. Leave empty for no limit. Deliveries beyond it wait their turn.</p>
  </div>
  <div class="field">
    <label class="check"><input type="checkbox" name="standard_webhooks" value="true" aria-describedby="standard_webhooks-hint"${values.standardWebhooks ? ' checked' : ''}> Also sign the Standard Webhooks way</label>
    <p class="hint" id="standard_webhooks-hint">Adds the <code>webhook-id</code>, <code>webhook-timestamp</code> and <code>webhook-signature</code> headers, so your receiver can verify requests with a Standard Webhooks library in its own language.</p>
  </div>
  <div class="actions"><button type="submit" class="button primary">${submitLabel}</button></div>
</form>`;
}

/** A webhook's settings and the actions on it. */
export function webhookSummary(session: PageSession, webhook: Webhook): Markup {
  const path = webhookPath(webhook.id);
  const headers = Object.entries(webhook.headers);
  return html`<dl class="summary">
  <div><dt>Endpoint</dt><dd class="url">${webhook.url}</dd></div>
  <div><dt>Status</dt><dd>${badge(webhook.status)}${webhook.disabled_reason ? html` <span class="hint">${webhook.disabled_reason} (since ${timestamp(webhook.disabled_at)})</span>` : ''}</dd></div>
  <div><dt>Events</dt><dd>${webhook.events.join(', ')}</dd></div>
  <div><dt>Custom headers</dt><dd>${headers.length === 0 ? 'none' : html`<ul class="plain">${headers.map(([name, value]) => html`<li><code>${name}: ${value}</code></li>`)}</ul>`}</dd></div>
  <div><dt>Delivered</dt><dd>${webhook.success_count} (last ${timestamp(webhook.last_delivered_at)})</dd></div>
  <div><dt>Failed attempts</dt><dd>${webhook.failure_count}</dd></div>
  <div><dt>Rate limit</dt><dd>${webhook.rate_limit === undefined ? 'none' : `${webhook.rate_limit} per second`}</dd></div>
  <div><dt>Circuit breaker</dt><dd>${webhook.circuit_state === 'open'
    ? html`${badge('open')} <span class="hint">since ${timestamp(webhook.circuit_opened_at)}, after ${webhook.consecutive_failures} failed attempts in a row: one attempt at a time until the endpoint answers</span>`
    : 'closed'}</dd></div>
  <div><dt>Signatures</dt><dd>X-Service-Signature${webhook.standard_webhooks ? ' and Standard Webhooks (webhook-signature)' : ''}${webhook.previous_secret_expires_at
    ? html`<br><span class="hint">The previous secret also signs until ${timestamp(webhook.previous_secret_expires_at)}, then the new one alone.</span>`
    : ''}</dd></div>
  <div><dt>Retries</dt><dd>${webhook.retry_config.max_retries} retries, ${webhook.retry_config.initial_delay} s doubling up to ${webhook.retry_config.max_delay} s</dd></div>
  <div><dt>Id</dt><dd><code>${webhook.id}</code></dd></div>
</dl>
<div class="actions" role="group" aria-label="Endpoint actions">
  <a class="button secondary" href="${path}/edit">Edit</a>
  ${webhook.status === 'active'
    ? postButton(session, `${path}/test-events`, 'Send test event')
    : html`<span class="hint">Test events need an active endpoint.</span>`}
  <a class="button secondary" href="${path}/rotate-secret">Rotate secret</a>
  <a class="button danger" href="${path}/delete">Delete</a>
</div>`;
}

/** A signing secret, shown once after create or rotate. */
export function secretReveal(webhookId: string, secret: string): Markup {
  return html`<div class="secret-box">
  <label for="secret">Signing secret</label>
  <input id="secret" type="text" readonly value="${secret}" class="secret" aria-describedby="secret-hint" data-select-on-focus>
  <p class="hint" id="secret-hint"><strong>Copy it now: it is shown only this once.</strong> Your receiver checks each request's signature with it.</p>
</div>
<p><a class="button primary" href="${webhookPath(webhookId)}">Continue to the endpoint</a></p>`;
}

/** Grace periods the rotation form offers, in seconds (0: none). */
const GRACE_PERIODS: ReadonlyArray<[seconds: number, label: string]> = [
  [0, 'None: the new secret alone signs every request from now on'],
  [3600, '1 hour'],
  [86400, '24 hours'],
  [MAX_GRACE_PERIOD_SECONDS, '7 days'],
];

/** The rotation's question, with the choice of a grace period for the old secret. */
export function rotateSecretForm(session: PageSession, action: string, url: string, cancelHref: string): Markup {
  return html`<p class="lead">Replace the signing secret of ${url}?</p>
<form method="post" action="${action}" class="stacked-form">
  ${csrfField(session)}
  <div class="field">
    <label for="grace_period">Keep the old secret valid for</label>
    <select id="grace_period" name="grace_period" aria-describedby="grace_period-hint">
      ${GRACE_PERIODS.map(([seconds, label]) => html`<option value="${seconds}">${label}</option>`)}
    </select>
    <p class="hint" id="grace_period-hint">The new secret is shown once on the next page. During a grace period each request carries two signatures, the new one first, so receivers holding either secret accept it; a receiver that compares the whole <code>X-Service-Signature</code> header to one value would not.</p>
  </div>
  <div class="actions">
    <button type="submit" class="button danger">Rotate secret</button>
    <a class="button secondary" href="${cancelHref}">Cancel</a>
  </div>
</form>`;
}

/** The question before a change that cannot be undone. */
export function confirmation(session: PageSession, action: string, question: Markup | string, consequence: string, confirmLabel: string, cancelHref: string): Markup {
  return html`<p class="lead">${question}</p>
<p>${consequence}</p>
<div class="actions">
  ${postButton(session, action, confirmLabel, 'danger')}
  <a class="button secondary" href="${cancelHref}">Cancel</a>
</div>`;
}
