import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../src/http-server.ts';
import { launchChromium } from '../support/browser.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { freePort } from '../support/ports.ts';

/*
 * Finding: GET /portal/enter redeemed the one-time link, and mail and chat link scanners fetch
 * links before the person clicks, so a link sent by mail could arrive used. GETs now only show
 * a page with one button; the POST it sends, with a CSRF token, opens the link, once.
 */

let h: Harness;
let server: Awaited<ReturnType<typeof startHttpServer>>;
let origin: string;
let browser: Browser;
let key: { id: string; projectId: string; token: string };

beforeAll(async () => {
  h = await startHarness();
  const port = await freePort();
  server = await startHttpServer(h.app.fetch, { port, host: '127.0.0.1' });
  origin = `http://127.0.0.1:${port}`;
  browser = await launchChromium();
  key = await h.createKey();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
  await h?.stop();
});

async function mintLink(): Promise<string> {
  const minted = await h.request('POST', '/api-gateway/v2/portal/sessions', { token: key.token });
  expect(minted.status).toBe(201);
  return `${origin}${new URL(minted.body.data.url).pathname}${new URL(minted.body.data.url).search}`;
}

/** A GET as a link scanner makes it: no cookies kept, redirects not followed. */
const scan = (link: string) => fetch(link, { redirect: 'manual' });

/** The cookie pairs of a response's Set-Cookie headers (`name=value`). */
const cookiePairs = (response: Response) => response.headers.getSetCookie().map((cookie) => cookie.split(';')[0]!);

describe('a portal link over HTTP', () => {
  it('survives any number of GETs, each showing one button and no session; the POST opens it, a second POST does not', async () => {
    const link = await mintLink();
    const pages: Response[] = [];
    for (let i = 0; i < 2; i += 1) {
      const response = await scan(link);
      expect(response.status).toBe(200);
      expect(cookiePairs(response).some((pair) => pair.startsWith('webhooks_portal='))).toBe(false);
      pages.push(response);
    }
    const html = await pages[1]!.text();
    expect(html.match(/<button/g)).toHaveLength(1);
    const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(html)?.[1];
    expect(csrf).toBeDefined();
    const linkCookie = cookiePairs(pages[1]!).join('; ');

    const post = (cookie: string, fields: Record<string, string>) =>
      fetch(`${origin}/portal/enter`, {
        method: 'POST',
        redirect: 'manual',
        headers: { Cookie: cookie, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
    const token = new URL(link).searchParams.get('token')!;

    // Without the page's CSRF token the POST opens nothing, and the link stays usable.
    expect((await post(linkCookie, { token })).status).toBe(403);
    const again = await scan(link);
    expect(again.status).toBe(200);
    const freshCookie = cookiePairs(again).join('; ');
    const freshCsrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(await again.text())![1]!;

    const opened = await post(freshCookie, { token, _csrf: freshCsrf });
    expect(opened.status).toBe(303);
    expect(opened.headers.get('Location')).toBe('/portal');
    const session = cookiePairs(opened).find((pair) => pair.startsWith('webhooks_portal='));
    expect(session).toMatch(/^webhooks_portal=pss_/);
    expect((await fetch(`${origin}/portal`, { headers: { Cookie: session! } })).status).toBe(200);

    const second = await post(freshCookie, { token, _csrf: freshCsrf });
    expect(second.status).not.toBe(303);
    expect(cookiePairs(second).some((pair) => /^webhooks_portal=pss_/.test(pair))).toBe(false);
    expect((await scan(link)).status).toBe(401);
  });
});

describe('a portal link in Chromium', () => {
  it('opens after two GETs with its button, and a second POST of the button does not open it again', async () => {
    const link = await mintLink();
    const person = await browser.newContext();
    const other = await browser.newContext();
    try {
      const page = await person.newPage();
      await page.goto(link);
      await page.goto(link);
      await expect(page.getByRole('button').count()).resolves.toBe(1);
      // A second browser that fetched the page too (a scanner rendering it) holds a valid form.
      const otherPage = await other.newPage();
      await otherPage.goto(link);

      await Promise.all([page.waitForURL(`${origin}/portal`), page.getByRole('button', { name: 'Open the portal' }).click()]);
      await expect(page.locator('h1').textContent()).resolves.toBe('Webhook endpoints');

      const secondPost = otherPage.waitForResponse((response) => response.request().method() === 'POST');
      await otherPage.getByRole('button', { name: 'Open the portal' }).click();
      expect((await secondPost).status()).toBe(401);
      await expect(otherPage.locator('h1').textContent()).resolves.toBe('This link cannot be opened');
      expect((await other.cookies()).some((cookie) => cookie.name === 'webhooks_portal')).toBe(false);
    } finally {
      await person.close();
      await other.close();
    }
  });
});
