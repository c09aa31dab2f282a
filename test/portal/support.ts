import { expect } from 'vitest';
import type { Harness } from '../support/harness.ts';

/** One answer of a portal page. */
export interface PortalPage {
  status: number;
  headers: Headers;
  html: string;
  location: string | null;
}

/**
 * A browser's view of the portal over `app.request()`: it keeps the session cookie (`cookie`)
 * and the link page's cookie the way a browser does, and posts forms with the CSRF token of
 * the last page it saw.
 */
export class PortalVisitor {
  readonly #h: Harness;
  cookie: string | undefined;
  #linkPageCookie: string | undefined;
  csrf: string | undefined;

  constructor(h: Harness) {
    this.#h = h;
  }

  async #send(path: string, init: RequestInit): Promise<PortalPage> {
    const headers = new Headers(init.headers);
    const cookies = [this.cookie, this.#linkPageCookie].filter(Boolean);
    if (cookies.length > 0) headers.set('Cookie', cookies.join('; '));
    const response = await this.#h.app.request(path, { ...init, headers, redirect: 'manual' });
    for (const setCookie of response.headers.getSetCookie()) {
      const [pair] = setCookie.split(';');
      const value = /=$/.test(pair!) || /Max-Age=0/i.test(setCookie) ? undefined : pair;
      if (pair!.startsWith('webhooks_portal=')) this.cookie = value;
      else this.#linkPageCookie = value;
    }
    const html = await response.text();
    this.csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(html)?.[1] ?? this.csrf;
    return { status: response.status, headers: response.headers, html, location: response.headers.get('Location') };
  }

  get(path: string): Promise<PortalPage> {
    return this.#send(path, { method: 'GET' });
  }

  /** Posts a form; `_csrf` is the last page's unless `fields` sets it (or sets it to undefined to leave it out). */
  post(path: string, fields: Record<string, string | string[] | undefined> = {}): Promise<PortalPage> {
    const form = new URLSearchParams();
    const all = { _csrf: this.csrf, ...fields };
    for (const [name, value] of Object.entries(all)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) form.append(name, item);
    }
    return this.#send(path, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: form.toString() });
  }

  /** Opens a link as a person does: its page, then the button's POST; answers the POST. */
  async open(linkPath: string): Promise<PortalPage> {
    const shown = await this.get(linkPath);
    expect(shown.status).toBe(200);
    return this.post('/portal/enter', { token: new URLSearchParams(linkPath.split('?')[1]).get('token')! });
  }

  /** Mints a link with the API key's token and opens it: the visitor is signed in. */
  async signIn(token: string): Promise<void> {
    const minted = await this.#h.request('POST', '/api-gateway/v2/portal/sessions', { token });
    expect(minted.status).toBe(201);
    const opened = await this.open(new URL(minted.body.data.url).pathname + new URL(minted.body.data.url).search);
    expect(opened.status).toBe(303);
    await this.get('/portal');
  }
}
