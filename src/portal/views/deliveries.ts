import { html } from 'hono/html';
import type { components } from '../../client/schema.ts';
import { DELIVERY_STATUSES, RETRYABLE_DELIVERY_STATUSES } from '../../db/schema.ts';
import { EVENT_KINDS } from '../../events/schema.ts';
import { badge, csrfField, postButton, timestamp, type Markup, type PageSession } from './layout.ts';
import { webhookPath } from './webhooks.ts';

type Delivery = components['schemas']['Delivery'];
type DeliveryAttempt = components['schemas']['DeliveryAttempt'];
type Operation = components['schemas']['Operation'];

/** Statuses a delivery moves on from by itself: a page showing one refreshes itself. */
const IN_FLIGHT = new Set(['pending', 'processing', 'failed']);

export const deliveryPath = (webhookId: string, deliveryId: string) => `${webhookPath(webhookId)}/deliveries/${encodeURIComponent(deliveryId)}`;
export const operationPath = (webhookId: string, operationId: string) => `${webhookPath(webhookId)}/operations/${encodeURIComponent(operationId)}`;

/** The filters of the deliveries list, as the query string carries them. */
export interface DeliveryFilters {
  status?: string | undefined;
  event?: string | undefined;
  starting_after?: string | undefined;
}

function listHref(webhookId: string, filters: DeliveryFilters): string {
  const query = new URLSearchParams(Object.entries(filters).filter((entry): entry is [string, string] => Boolean(entry[1])));
  const text = query.toString();
  return `${webhookPath(webhookId)}${text ? `?${text}` : ''}#deliveries`;
}

/**
 * `body` in an element that portal.js fetches again every 3 seconds and replaces while `on`
 * (the server stops marking it once nothing on it is in flight).
 */
export function liveRegion(id: string, on: boolean, note: string, body: Markup): Markup {
  return on
    ? html`<div id="${id}" data-live="3000"><p class="live-note">${note}</p>${body}</div>`
    : html`<div id="${id}">${body}</div>`;
}

/** Whether a page of deliveries has one that moves on by itself. */
export const anyInFlight = (deliveries: Delivery[]) => deliveries.some((delivery) => IN_FLIGHT.has(delivery.status));

function lastResult(delivery: Delivery): string {
  return delivery.last_error ?? (delivery.last_status_code === undefined ? '—' : `HTTP ${delivery.last_status_code}`);
}

/** A webhook's deliveries, newest first: filters, one page, the link to the next, and the bulk retry. */
export function deliveriesSection(session: PageSession, webhookId: string, deliveries: Delivery[], filters: DeliveryFilters, nextCursor: string | undefined): Markup {
  const filtered = Boolean(filters.status || filters.event);
  return html`<section id="deliveries" aria-labelledby="deliveries-title">
  <h2 id="deliveries-title">Deliveries</h2>
  <form method="get" action="${webhookPath(webhookId)}#deliveries" class="filters" aria-label="Filter deliveries">
    <div class="field"><label for="filter-status">Status</label>
      <select id="filter-status" name="status"><option value="">any</option>${DELIVERY_STATUSES.map(
        (status) => html`<option value="${status}"${filters.status === status ? ' selected' : ''}>${status.replace('_', ' ')}</option>`,
      )}</select></div>
    <div class="field"><label for="filter-event">Event</label>
      <select id="filter-event" name="event"><option value="">any</option>${EVENT_KINDS.map(
        (kind) => html`<option value="${kind}"${filters.event === kind ? ' selected' : ''}>${kind}</option>`,
      )}</select></div>
    <div class="actions"><button type="submit" class="button secondary">Apply filters</button>${filtered ? html` <a href="${listHref(webhookId, {})}">Clear</a>` : ''}</div>
  </form>
  ${deliveries.length === 0
    ? html`<p>${filtered ? 'No delivery matches these filters.' : 'No deliveries yet. Send a test event to see one arrive.'}</p>`
    : html`<div class="table-wrap"><table class="stack">
    <caption>${filters.starting_after ? 'Older deliveries' : 'Newest deliveries first'}</caption>
    <thead><tr><th scope="col">Delivery</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Created</th><th scope="col">Last result</th><th scope="col">Next retry</th></tr></thead>
    <tbody>${deliveries.map(
      (delivery) => html`<tr>
      <th scope="row" data-label="Delivery"><a href="${deliveryPath(webhookId, delivery.id)}"><code>${delivery.id}</code></a></th>
      <td data-label="Event">${delivery.event}</td>
      <td data-label="Status">${badge(delivery.status)}</td>
      <td data-label="Attempts">${delivery.attempt_count}</td>
      <td data-label="Created">${timestamp(delivery.created_at)}</td>
      <td data-label="Last result">${lastResult(delivery)}</td>
      <td data-label="Next retry">${timestamp(delivery.next_retry_at)}</td>
    </tr>`,
    )}</tbody></table></div>`}
  <nav aria-label="Deliveries pages" class="pager">
    ${filters.starting_after ? html`<a href="${listHref(webhookId, { ...filters, starting_after: undefined })}">Newest</a>` : ''}
    ${nextCursor ? html`<a href="${listHref(webhookId, { ...filters, starting_after: nextCursor })}" rel="next">Older deliveries</a>` : ''}
  </nav>
  <form method="post" action="${webhookPath(webhookId)}/deliveries/retry" class="bulk-retry">
    ${csrfField(session)}
    <fieldset><legend>Retry every delivery that</legend>
      <label class="check"><input type="checkbox" name="status" value="dead_letter" checked> ended in dead letter</label>
      <label class="check"><input type="checkbox" name="status" value="failed"> is waiting for its next retry</label>
    </fieldset>
    <button type="submit" class="button secondary">Retry all matching</button>
  </form>
</section>`;
}

/** A delivery, its attempts, and its retry; refreshing itself while the delivery is in flight. */
export function deliveryDetail(session: PageSession, webhookId: string, delivery: Delivery, attempts: DeliveryAttempt[]): Markup {
  const retryable = (RETRYABLE_DELIVERY_STATUSES as readonly string[]).includes(delivery.status);
  const body = html`<dl class="summary">
    <div><dt>Status</dt><dd>${badge(delivery.status)}</dd></div>
    <div><dt>Event</dt><dd>${delivery.event}</dd></div>
    <div><dt>Attempts</dt><dd>${delivery.attempt_count}</dd></div>
    <div><dt>Created</dt><dd>${timestamp(delivery.created_at)}</dd></div>
    <div><dt>Delivered</dt><dd>${timestamp(delivery.delivered_at)}</dd></div>
    <div><dt>Next retry</dt><dd>${timestamp(delivery.next_retry_at)}</dd></div>
    <div><dt>Last result</dt><dd>${lastResult(delivery)}</dd></div>
  </dl>
  ${retryable ? html`<div class="actions">${postButton(session, `${deliveryPath(webhookId, delivery.id)}/retry`, 'Retry now', 'primary')}</div>` : ''}
  <h2>Attempts</h2>
  ${attempts.length === 0
    ? html`<p>No attempt yet.</p>`
    : html`<div class="table-wrap"><table class="stack">
    <caption>Every attempt to send this delivery, first to last</caption>
    <thead><tr><th scope="col">Attempt</th><th scope="col">Started</th><th scope="col">Outcome</th><th scope="col">Status code</th><th scope="col">Duration</th><th scope="col">Error</th></tr></thead>
    <tbody>${attempts.map(
      (attempt) => html`<tr>
      <th scope="row" data-label="Attempt">${attempt.attempt_number}</th>
      <td data-label="Started">${timestamp(attempt.started_at)}</td>
      <td data-label="Outcome">${badge(attempt.outcome)}</td>
      <td data-label="Status code">${attempt.status_code ?? '—'}</td>
      <td data-label="Duration">${attempt.duration_ms === undefined ? '—' : `${attempt.duration_ms} ms`}</td>
      <td data-label="Error">${attempt.error ?? '—'}</td>
    </tr>`,
    )}</tbody></table></div>`}`;
  return liveRegion('delivery', anyInFlight([delivery]), 'This delivery is in flight: this page refreshes every 3 seconds.', body);
}

/** A bulk retry's progress, and its cancel while it runs; refreshing itself while it runs. */
export function operationDetail(session: PageSession, webhookId: string, operation: Operation): Markup {
  const running = operation.status === 'running';
  const done = operation.retried + operation.skipped;
  const body = html`<dl class="summary">
    <div><dt>Status</dt><dd>${badge(operation.status)}</dd></div>
    <div><dt>Matched</dt><dd>${operation.matched}</dd></div>
    <div><dt>Retried</dt><dd>${operation.retried}</dd></div>
    <div><dt>Skipped</dt><dd>${operation.skipped} <span class="hint">(they had moved on by themselves)</span></dd></div>
  </dl>
  <label for="operation-progress">Progress: ${done} of ${operation.matched}</label>
  <progress id="operation-progress" max="${Math.max(operation.matched, 1)}" value="${operation.matched === 0 ? 1 : done}">${done} of ${operation.matched}</progress>
  <div class="actions">
    ${running ? postButton(session, `${operationPath(webhookId, operation.id)}/cancel`, 'Cancel the retry', 'danger') : ''}
    <a class="button secondary" href="${webhookPath(webhookId)}#deliveries">Back to the deliveries</a>
  </div>`;
  return liveRegion('operation', running, 'The retry is running: this page refreshes every 3 seconds.', body);
}
