import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { PORTAL_BASE } from '../link.ts';
import { CSRF_FIELD } from '../session.ts';

/** Rendered markup: what `html` returns. */
export type Markup = HtmlEscapedString | Promise<HtmlEscapedString>;

/** The signed-in session as pages show it. */
export interface PageSession {
  projectId: string;
  csrfToken: string;
}

export interface PageOptions {
  title: string;
  /** Absent on the pages shown without a session (errors, an expired link). */
  session?: PageSession | undefined;
  /** A confirmation of what was just done. */
  notice?: string | undefined;
  /** Why the last change was refused, as the API said it. */
  error?: string | undefined;
  /** Links above the title, from the webhooks list down to the parent page. */
  breadcrumbs?: { href: string; label: string }[];
}

/** The hidden CSRF field every form that changes something carries. */
export const csrfField = (session: Pick<PageSession, 'csrfToken'>) => html`<input type="hidden" name="${CSRF_FIELD}" value="${session.csrfToken}">`;

/** A button that posts to `action` (with the CSRF field), for actions without fields. */
export function postButton(session: PageSession, action: string, label: string, variant: 'primary' | 'secondary' | 'danger' = 'secondary'): Markup {
  return html`<form method="post" action="${action}" class="inline-form">${csrfField(session)}<button type="submit" class="button ${variant}">${label}</button></form>`;
}

/** A whole page: header with the project and sign-out, the title, the notice or error, then `body`. */
export function page(options: PageOptions, body: Markup): Markup {
  const { session } = options;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${options.title} · Webhooks portal</title>
<link rel="stylesheet" href="${PORTAL_BASE}/assets/portal.css">
<script src="${PORTAL_BASE}/assets/portal.js" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="site-header">
  <div class="site-header-inner">
    <a class="brand" href="${PORTAL_BASE}">Webhooks</a>
    ${session
      ? html`<span class="project">Project <strong>${session.projectId}</strong></span>
    <form method="post" action="${PORTAL_BASE}/sign-out" class="inline-form">${csrfField(session)}<button type="submit" class="button link-button">Sign out</button></form>`
      : ''}
  </div>
</header>
<main id="main" tabindex="-1">
  ${options.breadcrumbs?.length
    ? html`<nav aria-label="Breadcrumb" class="breadcrumbs"><ol>${options.breadcrumbs.map((crumb) => html`<li><a href="${crumb.href}">${crumb.label}</a></li>`)}</ol></nav>`
    : ''}
  <h1>${options.title}</h1>
  ${options.notice ? html`<p class="notice" role="status">${options.notice}</p>` : ''}
  ${options.error ? html`<div class="error-summary" id="form-error" role="alert"><h2>The change was not made</h2><p>${options.error}</p></div>` : ''}
  ${body}
</main>
</body>
</html>`;
}

/** A timestamp in UTC, machine-readable in `datetime`. */
export function timestamp(iso: string | undefined): Markup | string {
  if (!iso) return '—';
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
}

/** A status as a labelled badge: words, not colour alone. */
export function badge(status: string): Markup {
  return html`<span class="badge badge-${status}">${status.replace('_', ' ')}</span>`;
}
