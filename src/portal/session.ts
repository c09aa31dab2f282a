import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { createMiddleware } from 'hono/factory';
import { authenticatePortalSession, PORTAL_LINK_TTL_MS, PORTAL_SESSION_TTL_MS } from '../db/queries/portal-sessions.ts';
import { constantTimeEqual, randomToken, sha256Hex } from '../secrets/crypto.ts';
import { PORTAL_BASE } from './link.ts';
import type { PortalEnv } from './env.ts';
import { PortalError } from './errors.ts';

/** The session cookie: HTTP-only, same-site (Lax: sent when the customer follows a link to the portal, never on another site's requests). */
export const SESSION_COOKIE = 'webhooks_portal';
/** The form field every change must carry (synchronizer token, derived from the session's secret). */
export const CSRF_FIELD = '_csrf';

/**
 * The cookie of a link's page: ties the button's form to the browser the page was shown to, so
 * another site cannot sign a visitor in to a session of its own choosing.
 */
const LINK_PAGE_COOKIE = 'webhooks_portal_link';
const LINK_PAGE_PATH = `${PORTAL_BASE}/enter`;

/** The CSRF token of a session: a hash of its cookie token, so nothing more is stored and it changes with the session. */
export function csrfTokenOf(sessionToken: string): string {
  return sha256Hex(`portal-csrf:${sessionToken}`);
}

/** Whether the customer reaches the service over https (then the cookie is `Secure`). */
function isHttps(c: Context<PortalEnv>): boolean {
  return new URL(c.var.deps.publicUrl ?? c.req.url).protocol === 'https:';
}

/** Sets the session cookie after a link was opened. */
export function startBrowserSession(c: Context<PortalEnv>, sessionToken: string): void {
  setCookie(c, SESSION_COOKIE, sessionToken, {
    path: PORTAL_BASE,
    httpOnly: true,
    sameSite: 'Lax',
    secure: isHttps(c),
    maxAge: PORTAL_SESSION_TTL_MS / 1000,
  });
}

/** Shows a link's page to this browser: sets a fresh page cookie and returns the CSRF token its form carries. */
export function startLinkPage(c: Context<PortalEnv>): string {
  const secret = randomToken(32);
  setCookie(c, LINK_PAGE_COOKIE, secret, {
    path: LINK_PAGE_PATH,
    httpOnly: true,
    sameSite: 'Strict',
    secure: isHttps(c),
    maxAge: PORTAL_LINK_TTL_MS / 1000,
  });
  return csrfTokenOf(secret);
}

/** Whether `sent` is the CSRF token of this browser's link page cookie; the cookie is used up either way. */
export function passedLinkPage(c: Context<PortalEnv>, sent: unknown): boolean {
  const secret = getCookie(c, LINK_PAGE_COOKIE);
  deleteCookie(c, LINK_PAGE_COOKIE, { path: LINK_PAGE_PATH, secure: isHttps(c) });
  return secret !== undefined && typeof sent === 'string' && constantTimeEqual(sent, csrfTokenOf(secret));
}

/** Removes the session cookie (sign out). */
export function endBrowserSession(c: Context<PortalEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { path: PORTAL_BASE, secure: isHttps(c) });
}

/**
 * Every portal page but the link's page: a live session (its cookie, unexpired, not signed out,
 * its API key not revoked), and on every change the session's CSRF token in the form.
 */
/**
 * The posted form's fields (repeated ones as arrays). A body that is no form at all (a broken
 * multipart body, say) is the sender's fault: a 400 page, not a failure of the portal.
 */
export async function readForm(c: Context<PortalEnv>): Promise<Record<string, string | File | (string | File)[]>> {
  try {
    return await c.req.parseBody({ all: true });
  } catch {
    throw new PortalError(400, 'This form could not be read', 'Go back, reload the page and send the form again.');
  }
}

export const requirePortalSession = createMiddleware<PortalEnv>(async (c, next) => {
  const token = getCookie(c, SESSION_COOKIE);
  const found = token ? await authenticatePortalSession(c.var.deps.db, token) : undefined;
  if (!token || !found) {
    if (token) endBrowserSession(c);
    throw new PortalError(401, 'Your portal session has ended', 'Ask the product you came from for a new portal link.');
  }
  const csrfToken = csrfTokenOf(token);
  if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
    const form = await readForm(c);
    const sent = form[CSRF_FIELD];
    if (typeof sent !== 'string' || !constantTimeEqual(sent, csrfToken)) {
      throw new PortalError(403, 'This form has expired', 'Reload the page and try again.');
    }
    c.set('form', form);
  }
  c.set('session', found.session);
  c.set('apiKey', found.apiKey);
  c.set('csrfToken', csrfToken);
  c.set('logger', c.var.logger.child({ portalSessionId: found.session.id, projectId: found.session.projectId }));
  await next();
});
