import { readFileSync } from 'node:fs';
import { Hono } from 'hono';
import { html } from 'hono/html';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { endPortalSession, portalLinkOpenable, redeemPortalLink } from '../db/queries/portal-sessions.ts';
import type { AppFetch } from './api.ts';
import type { PortalEnv } from './env.ts';
import { ApiRefusal, PortalError } from './errors.ts';
import { PORTAL_BASE } from './link.ts';
import { pageSession } from './pages.ts';
import { deliveryPages } from './routes/deliveries.ts';
import { webhookPages } from './routes/webhooks.ts';
import { CSRF_FIELD, endBrowserSession, passedLinkPage, readForm, requirePortalSession, startBrowserSession, startLinkPage } from './session.ts';
import { csrfField, page } from './views/layout.ts';

const ASSETS = new Map(
  [
    ['portal.css', 'text/css; charset=utf-8'],
    ['portal.js', 'text/javascript; charset=utf-8'],
  ].map(([name, type]) => [name!, { body: readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8'), type: type! }]),
);

/** Every portal answer: no framing, scripts and styles of the service only, nothing cached or leaked in a referrer. */
const SECURITY_HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

/** Titles of the API's refusals as the portal shows them. */
const REFUSAL_TITLES: Record<number, string> = {
  400: 'That request was refused',
  401: 'Your portal session has ended',
  403: 'Not available to this project',
  404: 'Not found',
  409: 'Not possible right now',
};

/**
 * The customer portal (`/portal`): server-rendered pages over the v2 API. A one-time link
 * becomes a session cookie; every page and action is an in-process call of the API (through
 * `appFetch`) as the API key the session acts for, so the API's rules are the portal's.
 */
export function portalRouter(appFetch: AppFetch) {
  const portal = new Hono<PortalEnv>();
  portal.use(async (c, next) => {
    await next();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
      if (!c.res.headers.has(name)) c.header(name, value);
    }
  });

  portal.get('/assets/:name', (c) => {
    const asset = ASSETS.get(c.req.param('name'));
    if (!asset) throw new PortalError(404, 'Not found', 'There is no such file.');
    return c.body(asset.body, 200, { 'Content-Type': asset.type, 'Cache-Control': 'public, max-age=300' });
  });

  const unusableLink = () =>
    new PortalError(401, 'This link cannot be opened', 'Portal links open once, within ten minutes, while the key they were made with is active. Ask the product you came from for a new one.');

  // Mail and chat link scanners fetch a link before the customer clicks it: any number of GETs
  // only show a button, and the POST it sends (with the page's CSRF token) opens the link.
  portal.get('/enter', async (c) => {
    const token = c.req.query('token') ?? '';
    if (!(await portalLinkOpenable(c.var.deps.db, token))) throw unusableLink();
    const csrfToken = startLinkPage(c);
    return c.html(
      page(
        { title: 'Open the webhooks portal' },
        html`<p>This link opens the portal once, in this browser, for one hour.</p>
<form method="post" action="${PORTAL_BASE}/enter"><input type="hidden" name="token" value="${token}">${csrfField({ csrfToken })}<button type="submit" class="button primary">Open the portal</button></form>`,
      ),
    );
  });

  portal.post('/enter', async (c) => {
    const form = await readForm(c);
    if (!passedLinkPage(c, form[CSRF_FIELD])) {
      throw new PortalError(403, 'This form has expired', 'Open the link again, then press the button.');
    }
    const token = form['token'];
    const opened = typeof token === 'string' ? await redeemPortalLink(c.var.deps.db, token) : undefined;
    if (!opened) throw unusableLink();
    startBrowserSession(c, opened.sessionToken);
    c.var.logger.info({ portalSessionId: opened.session.id, projectId: opened.session.projectId }, 'portal session started');
    return c.redirect(PORTAL_BASE, 303);
  });

  portal.use(requirePortalSession);
  portal.post('/sign-out', async (c) => {
    await endPortalSession(c.var.deps.db, c.var.session.id);
    endBrowserSession(c);
    return c.html(page({ title: 'Signed out' }, html`<p>You are signed out. Open a new portal link to come back.</p>`));
  });
  portal.route('/', webhookPages(appFetch));
  portal.route('/', deliveryPages(appFetch));
  portal.all('*', () => {
    throw new PortalError(404, 'Not found', 'There is no such page in the portal.');
  });

  portal.onError((error, c) => {
    // Set when the session was checked before the error: the page keeps its header and sign-out.
    const session = c.var.csrfToken ? pageSession(c) : undefined;
    if (error instanceof PortalError) {
      return c.html(page({ title: error.message, session }, html`<p>${error.detail}</p>`), error.status);
    }
    if (error instanceof ApiRefusal) {
      if (error.retryAfter) c.header('Retry-After', error.retryAfter);
      return c.html(
        page(
          { title: REFUSAL_TITLES[error.status] ?? REFUSAL_TITLES[400]!, session },
          html`<p class="error-text">${error.message}</p><p><a href="${PORTAL_BASE}">Back to the webhooks</a></p>`,
        ),
        error.status as ContentfulStatusCode,
      );
    }
    c.var.logger.error({ err: error }, 'portal page failed');
    return c.html(page({ title: 'Something went wrong', session }, html`<p>Try again in a moment (request ${c.var.requestId}).</p>`), 500);
  });
  return portal;
}
