/// <reference lib="dom" />
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** Debian's Chromium (apt-get install chromium); CHROMIUM_PATH points elsewhere. Browser downloads are not used. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Starts the system's Chromium, headless; fails with what to install when there is none. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium, or set CHROMIUM_PATH`);
  // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

/** Opens a portal link as a person does: its page, then its one button. */
export async function openPortalLink(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await Promise.all([page.waitForURL((target) => target.pathname === '/portal'), page.getByRole('button', { name: 'Open the portal' }).click()]);
}

/** The WCAG 2.1 A and AA rules (and axe's best practices) that axe-core checks, on the page as it is now. */
export async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; nodes: { target: unknown }[] }[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')}`);
  });
  expect(violations).toEqual([]);
}

/** Width of content beyond the viewport (0: no sideways scrolling). */
export const horizontalOverflow = (page: Page): Promise<number> =>
  page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

/** Presses Tab until `selector` has the focus: the element is reachable by keyboard. */
export async function tabTo(page: Page, selector: string): Promise<void> {
  for (let presses = 0; presses < 30; presses += 1) {
    if (await page.evaluate((target) => document.activeElement?.matches(target) ?? false, selector)) return;
    await page.keyboard.press('Tab');
  }
  throw new Error(`${selector} is not reachable with Tab`);
}

/** Waits until `count` elements match `selector`, with the page refreshing itself (no reload). */
export async function waitForCount(page: Page, selector: string, count: number, timeoutMs = 45_000): Promise<void> {
  await page.waitForFunction(([target, wanted]) => document.querySelectorAll(target as string).length === wanted, [selector, count] as const, { timeout: timeoutMs });
}
