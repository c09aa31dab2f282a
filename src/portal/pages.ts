import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { PortalEnv } from './env.ts';
import { page, type Markup, type PageOptions, type PageSession } from './views/layout.ts';

/** Confirmations of what the last action did, named in the redirect's `done` parameter (never free text from the URL). */
const NOTICES = {
  updated: 'Endpoint saved.',
  deleted: 'Endpoint deleted, with its deliveries.',
  'test-sent': 'Test event sent. This page follows its delivery.',
  retried: 'Queued for retry.',
  cancelled: 'Bulk retry cancelled: what it had queued goes on; nothing more is queued.',
  'secret-shown': 'Its signing secret was shown once, after the change that made it. For a new one, rotate it.',
} as const satisfies Record<string, string>;

/** The signed-in session as the views need it. */
export const pageSession = (c: Context<PortalEnv>): PageSession => ({
  projectId: c.var.session.projectId,
  csrfToken: c.var.csrfToken,
});

/** A page of the signed-in portal, with the notice the redirect named. */
export function render(c: Context<PortalEnv>, options: Omit<PageOptions, 'session'>, body: Markup, status: ContentfulStatusCode = 200) {
  const done = c.req.query('done');
  return c.html(
    page({ notice: done && Object.hasOwn(NOTICES, done) ? NOTICES[done as keyof typeof NOTICES] : undefined, ...options, session: pageSession(c) }, body),
    status,
  );
}

/** After a change: see the result at `path` (303, so reloading does not post again). */
export const redirectAfterChange = (c: Context<PortalEnv>, path: string, done?: keyof typeof NOTICES) =>
  c.redirect(done ? `${path}${path.includes('?') ? '&' : '?'}done=${done}` : path, 303);

/** The values of a form field, repeated or not. */
export function formValues(c: Context<PortalEnv>, name: string): string[] {
  const value = c.var.form[name];
  const values = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return values.filter((item): item is string => typeof item === 'string');
}

/** A single text field of the form ('' when absent). */
export const formValue = (c: Context<PortalEnv>, name: string): string => formValues(c, name)[0] ?? '';
