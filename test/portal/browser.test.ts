/// <reference lib="dom" />
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../src/http-server.ts';
import { verifyWebhook } from '../../src/receiver/index.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { freePort } from '../support/ports.ts';
import { expectAccessible as axeCheck, horizontalOverflow, launchChromium, openPortalLink, tabTo as tabToOn, waitForCount } from '../support/browser.ts';

/**
 * The portal in a real browser: Debian's Chromium drives the service served on a real port, with a worker delivering to a real HTTPS
 * receiver. `npm run screenshots` runs it with PORTAL_SCREENSHOTS=1 to refresh docs/img/.
 */
const SCREENSHOTS = process.env.PORTAL_SCREENSHOTS === '1' ? path.resolve('docs/img') : undefined;
const LIVE_TIMEOUT = 45_000;

let h: Harness;
let receiver: HttpsReceiver;
let server: Awaited<ReturnType<typeof startHttpServer>>;
let origin: string;
let browser: Browser;
let page: Page;
let key: { id: string; projectId: string; token: string };

beforeAll(async () => {
  receiver = await startHttpsReceiver();
  h = await startHarness({ worker: true, delivery: { caFile: receiver.certFile } });
  const port = await freePort();
  server = await startHttpServer(h.app.fetch, { port, host: '127.0.0.1' });
  origin = `http://127.0.0.1:${port}`;
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  key = await h.createKey();
  if (SCREENSHOTS) mkdirSync(SCREENSHOTS, { recursive: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
  await h?.stop();
  await receiver?.close();
});

async function mintLink(token: string): Promise<string> {
  const response = await fetch(`${origin}/api-gateway/v2/portal/sessions`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });
  expect(response.status).toBe(201);
  return ((await response.json()) as { data: { url: string } }).data.url;
}

const expectAccessible = () => axeCheck(page);

/** The page fits a phone's width (390 px) without sideways scrolling, and stays accessible there. */
async function expectPhoneFriendly(name: string): Promise<void> {
  await page.setViewportSize({ width: 390, height: 844 });
  expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
  await expectAccessible();
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, `portal-${name}-phone.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
}

async function shoot(name: string): Promise<void> {
  await expectAccessible();
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, `portal-${name}.png`), fullPage: true });
}

const tabTo = (selector: string) => tabToOn(page, selector);

/** Waits, without reloading, for the live-refreshing page to show a delivery status. */
async function waitForStatus(section: string, status: string): Promise<void> {
  await page.locator(`${section} .badge-${status}`).first().waitFor({ timeout: LIVE_TIMEOUT });
}

let webhookPath: string;
let secret: string;

describe('the customer portal in Chromium', () => {
  it('opens from a minted link, keyboard first', async () => {
    await openPortalLink(page, await mintLink(key.token));
    expect(new URL(page.url()).pathname).toBe('/portal');
    await expect(page.locator('h1').textContent()).resolves.toBe('Webhook endpoints');
    const cookies = await page.context().cookies();
    expect(cookies.find((cookie) => cookie.name === 'webhooks_portal')).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/portal' });
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await shoot('empty');
  });

  it('creates an endpoint with the keyboard alone and shows its secret once', async () => {
    await page.getByRole('link', { name: 'Add endpoint' }).click();
    await shoot('create');
    await tabTo('#url');
    await page.keyboard.type(`${receiver.url}/portal`);
    await tabTo('button[type=submit].primary');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/portal\/webhooks\/wh_[0-9a-z]{26}\/secret$/);
    await expect(page.locator('h1').textContent()).resolves.toBe('Endpoint added');
    secret = await page.locator('#secret').inputValue();
    expect(secret).toMatch(/^whsec_/);
    await shoot('secret');
    await page.getByRole('link', { name: 'Continue to the endpoint' }).click();
    webhookPath = new URL(page.url()).pathname;
    expect(webhookPath).toMatch(/^\/portal\/webhooks\/wh_[0-9a-z]{26}$/);
    expect(await page.content()).not.toContain(secret);
  });

  it('sends a test event and follows it live to the HTTPS receiver', async () => {
    receiver.behave(() => ({ status: 200 }));
    const before = receiver.requests.length;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toContain('Test event sent.');
    await waitForStatus('#delivery', 'delivered');
    const [request] = await receiver.waitForRequests(before + 1);
    const payload = verifyWebhook({ rawBody: receiver.requests[before]!.rawBody, headers: receiver.requests[before]!.headers, secret });
    expect(payload.event).toBe('docauth.completed');
    expect(request).toBeDefined();
    await expect(page.locator('#delivery tbody tr').count()).resolves.toBe(1);
    await expect(page.locator('#delivery tbody').textContent()).resolves.toContain('200');
    await shoot('delivery');
    await expectPhoneFriendly('delivery');
  });

  it('shows dead letters live, retries one, and bulk-retries the rest with progress', async () => {
    receiver.behave(() => ({ status: 503 }));
    await page.goto(`${origin}${webhookPath}`);
    for (let sent = 0; sent < 2; sent += 1) {
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.waitForURL(/done=test-sent/);
      await page.goto(`${origin}${webhookPath}`);
    }
    // The list refreshes itself while deliveries are in flight, until both are dead letters.
    await expect(page.locator('#webhook').getAttribute('data-live')).resolves.toBe('3000');
    await waitForCount(page, '#deliveries .badge-dead_letter', 2);
    await expect(page.locator('#webhook').getAttribute('data-live')).resolves.toBeNull();
    await shoot('webhook');
    await expectPhoneFriendly('webhook');

    await page.selectOption('#filter-status', 'dead_letter');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    expect(new URL(page.url()).searchParams.get('status')).toBe('dead_letter');
    await expect(page.locator('#deliveries tbody tr').count()).resolves.toBe(2);

    receiver.behave(() => ({ status: 200 }));
    await page.locator('#deliveries tbody tr a').first().click();
    await expect(page.locator('#delivery tbody tr').count()).resolves.toBe(5);
    await expect(page.locator('#delivery tbody').textContent()).resolves.toContain('503');
    await shoot('dead-letter');
    await page.getByRole('button', { name: 'Retry now' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toBe('Queued for retry.');
    await waitForStatus('#delivery', 'delivered');
    await expect(page.locator('#delivery tbody tr').count()).resolves.toBe(6);

    await page.goto(`${origin}${webhookPath}`);
    await page.getByRole('button', { name: 'Retry all matching' }).click();
    await page.waitForURL(/\/operations\/op_/);
    await page.locator('#operation .badge-completed').waitFor({ timeout: LIVE_TIMEOUT });
    await expect(page.locator('label[for=operation-progress]').textContent()).resolves.toBe('Progress: 1 of 1');
    await shoot('bulk-retry');
    await page.getByRole('link', { name: 'Back to the deliveries' }).click();
    await waitForCount(page, '#deliveries .badge-delivered', 3);
  });

  it('rotates the secret: the next delivery is signed with the new one only', async () => {
    await page.goto(`${origin}${webhookPath}`);
    await page.getByRole('link', { name: 'Rotate secret' }).click();
    await shoot('rotate');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = await page.locator('#secret').inputValue();
    expect(rotated).not.toBe(secret);
    await page.getByRole('link', { name: 'Continue to the endpoint' }).click();
    const before = receiver.requests.length;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await waitForStatus('#delivery', 'delivered');
    const [request] = (await receiver.waitForRequests(before + 1)).slice(before);
    expect(() => verifyWebhook({ rawBody: request!.rawBody, headers: request!.headers, secret: rotated })).not.toThrow();
    expect(() => verifyWebhook({ rawBody: request!.rawBody, headers: request!.headers, secret })).toThrow(/signature/i);
  });

  it('lists the endpoint and edits it', async () => {
    await page.goto(`${origin}/portal`);
    await expect(page.locator('tbody tr').count()).resolves.toBe(1);
    await shoot('webhooks');
    await expectPhoneFriendly('webhooks');
    await page.goto(`${origin}${webhookPath}/edit`);
    await page.fill('#headers', 'X-Team: payments');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toBe('Endpoint saved.');
    await expect(page.locator('.summary').textContent()).resolves.toContain('X-Team: payments');
  });

  it("never shows another project's data", async () => {
    const stranger = await h.createKey();
    const theirs = await h.request('POST', '/api-gateway/v2/webhooks', {
      token: stranger.token,
      body: { api_key_id: stranger.id, url: 'https://stranger.example.com/hook', events: ['docauth.completed'] },
    });
    await page.goto(`${origin}/portal`);
    expect(await page.content()).not.toContain('stranger.example.com');
    const response = await page.goto(`${origin}/portal/webhooks/${theirs.body.data.id}`);
    expect(response!.status()).toBe(403);
    expect(await page.content()).not.toContain('stranger.example.com');
    await expect(page.locator('main').textContent()).resolves.toContain('belongs to another project');
  });

  it('deletes the endpoint after asking, and signs out', async () => {
    await page.goto(`${origin}${webhookPath}`);
    await page.getByRole('link', { name: 'Delete' }).click();
    await shoot('delete');
    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    await expect(page.locator('.notice').textContent()).resolves.toBe('Endpoint deleted, with its deliveries.');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expect(page.locator('h1').textContent()).resolves.toBe('Signed out');
    const response = await page.goto(`${origin}/portal`);
    expect(response!.status()).toBe(401);
  });
});
