import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { revokeApiKey } from '../../src/db/queries/api-keys.ts';
import { portalSessions } from '../../src/db/schema.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { PortalVisitor } from './support.ts';

const BASE = '/api-gateway/v2';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.stop());

async function mint(token: string) {
  const response = await h.request('POST', `${BASE}/portal/sessions`, { token });
  expect(response.status).toBe(201);
  const url = new URL(response.body.data.url);
  return { response, path: url.pathname + url.search, id: response.body.data.id as string };
}

async function webhookCount(token: string) {
  return (await h.request('GET', `${BASE}/webhooks`, { token })).body.data.length as number;
}

describe('POST /portal/sessions', () => {
  it('answers a one-time link on the request origin, valid ten minutes, never cached', async () => {
    const key = await h.createKey();
    const before = Date.now();
    const { response } = await mint(key.token);
    const { data } = response.body;
    expect(data.id).toMatch(/^ps_[0-9a-z]{26}$/);
    expect(data.url).toMatch(/^http:\/\/localhost\/portal\/enter\?token=plt_[0-9a-z]{26}_[A-Za-z0-9_-]{43}$/);
    const expiresAt = Date.parse(data.expires_at);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 10 * 60_000 - 1000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 10 * 60_000);
    expect(response.headers.get('Cache-Control')).toBe('no-store');
    const [row] = await h.db.select().from(portalSessions).where(eq(portalSessions.id, data.id));
    // The link's secret follows `plt_<id>_`; it is base64url, which may hold `_` itself.
    const secret = new URL(data.url).searchParams.get('token')!.slice('plt_'.length + 26 + 1);
    expect(secret).toHaveLength(43);
    expect(row!.linkHash).not.toContain(secret);
  });

  it('needs an API key with the webhooks service, in the v2 error body', async () => {
    expect((await h.request('POST', `${BASE}/portal/sessions`)).body.error.code).toBe('invalid_api_key');
    const other = await h.createKey(undefined, ['billing']);
    const refused = await h.request('POST', `${BASE}/portal/sessions`, { token: other.token });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('service_not_enabled');
  });
});

describe('opening a link', () => {
  it('sets an HTTP-only, same-site session cookie scoped to the portal, and opens only once', async () => {
    const key = await h.createKey();
    const { path } = await mint(key.token);
    const visitor = new PortalVisitor(h);
    const opened = await visitor.open(path);
    expect(opened.status).toBe(303);
    expect(opened.location).toBe('/portal');
    const cookie = opened.headers.getSetCookie().find((setCookie) => setCookie.startsWith('webhooks_portal='))!;
    expect(cookie).toMatch(/^webhooks_portal=pss_[0-9a-z]{26}_[A-Za-z0-9_-]{43};/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).toMatch(/Path=\/portal/);
    expect(cookie).toMatch(/Max-Age=3600/);
    const home = await visitor.get('/portal');
    expect(home.status).toBe(200);
    expect(home.html).toContain(key.projectId);

    const again = await new PortalVisitor(h).get(path);
    expect(again.status).toBe(401);
    expect(again.headers.get('Set-Cookie')).toBeNull();
    expect(again.html).toContain('This link cannot be opened');
  });

  it('does not open once the key it acts as is revoked', async () => {
    const key = await h.createKey();
    const { path } = await mint(key.token);
    await revokeApiKey(h.db, key.id);
    const refused = await new PortalVisitor(h).get(path);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('Set-Cookie')).toBeNull();
    expect(refused.html).toContain('This link cannot be opened');
  });

  it('refuses an expired link and a forged token', async () => {
    const key = await h.createKey();
    const { path, id } = await mint(key.token);
    await h.db.update(portalSessions).set({ linkExpiresAt: new Date(Date.now() - 1000) }).where(eq(portalSessions.id, id));
    expect((await new PortalVisitor(h).get(path)).status).toBe(401);
    const forged = path.replace(/_[A-Za-z0-9_-]{43}$/, `_${'A'.repeat(43)}`);
    expect((await new PortalVisitor(h).get(forged)).status).toBe(401);
    expect((await new PortalVisitor(h).get('/portal/enter?token=nonsense')).status).toBe(401);
  });
});

describe('the session', () => {
  it('is required on every page', async () => {
    const anonymous = new PortalVisitor(h);
    for (const path of ['/portal', '/portal/webhooks/new', '/portal/webhooks/wh_x']) {
      const page = await anonymous.get(path);
      expect(page.status).toBe(401);
      expect(page.html).toContain('Your portal session has ended');
    }
    anonymous.cookie = `webhooks_portal=pss_${'0'.repeat(26)}_${'A'.repeat(43)}`;
    expect((await anonymous.get('/portal')).status).toBe(401);
  });

  it('ends when its API key is revoked, when it expires, and on sign out', async () => {
    const key = await h.createKey();
    const revoked = new PortalVisitor(h);
    await revoked.signIn(key.token);
    await revokeApiKey(h.db, key.id);
    expect((await revoked.get('/portal')).status).toBe(401);

    const other = await h.createKey();
    const expiring = new PortalVisitor(h);
    await expiring.signIn(other.token);
    await h.db.update(portalSessions).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(portalSessions.projectId, other.projectId));
    expect((await expiring.get('/portal')).status).toBe(401);

    const third = await h.createKey();
    const leaving = new PortalVisitor(h);
    await leaving.signIn(third.token);
    const cookie = leaving.cookie;
    const signedOut = await leaving.post('/portal/sign-out');
    expect(signedOut.status).toBe(200);
    expect(signedOut.html).toContain('You are signed out');
    expect(signedOut.headers.get('Set-Cookie')).toMatch(/webhooks_portal=;.*Max-Age=0/);
    leaving.cookie = cookie;
    expect((await leaving.get('/portal')).status).toBe(401);
  });

  it('refuses every change without the CSRF token of the session, and changes nothing', async () => {
    const key = await h.createKey();
    const visitor = new PortalVisitor(h);
    await visitor.signIn(key.token);
    const fields = { url: 'https://example.com/csrf', events: 'docauth.completed' };
    const missing = await visitor.post('/portal/webhooks', { ...fields, _csrf: undefined });
    expect(missing.status).toBe(403);
    expect(missing.html).toContain('This form has expired');
    const forged = await visitor.post('/portal/webhooks', { ...fields, _csrf: 'f'.repeat(64) });
    expect(forged.status).toBe(403);
    // Another session's token is not this session's.
    const other = new PortalVisitor(h);
    await other.signIn(key.token);
    expect(other.csrf).not.toBe(visitor.csrf);
    expect((await visitor.post('/portal/webhooks', { ...fields, _csrf: other.csrf })).status).toBe(403);
    expect(await webhookCount(key.token)).toBe(0);

    const made = await visitor.post('/portal/webhooks', fields);
    expect(made.status).toBe(303);
    expect(await webhookCount(key.token)).toBe(1);
  });

  it('answers every page with headers that forbid framing, foreign scripts and caching', async () => {
    const key = await h.createKey();
    const visitor = new PortalVisitor(h);
    await visitor.signIn(key.token);
    const home = await visitor.get('/portal');
    expect(home.headers.get('Content-Security-Policy')).toContain("frame-ancestors 'none'");
    expect(home.headers.get('Content-Security-Policy')).toContain("script-src 'self'");
    expect(home.headers.get('X-Frame-Options')).toBe('DENY');
    expect(home.headers.get('Cache-Control')).toBe('no-store');
    expect(home.headers.get('Referrer-Policy')).toBe('no-referrer');
    expect(home.html).not.toMatch(/<script>|style="/);
    const css = await visitor.get('/portal/assets/portal.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('Content-Type')).toMatch(/^text\/css/);
  });

  it('answers 404 for an asset that is not one, whatever its name, and 400 for a body that is no form, signed in or not', async () => {
    const anyone = new PortalVisitor(h);
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'nope.css']) {
      expect((await anyone.get(`/portal/assets/${name}`)).status, name).toBe(404);
    }
    const broken = { method: 'POST', headers: { 'Content-Type': 'multipart/form-data; boundary=x' }, body: 'garbage' };
    expect((await h.app.request('/portal/enter', broken)).status).toBe(400);
    const key = await h.createKey();
    const visitor = new PortalVisitor(h);
    await visitor.signIn(key.token);
    const signedIn = await h.app.request('/portal/webhooks', { ...broken, headers: { ...broken.headers, Cookie: visitor.cookie! } });
    expect(signedIn.status).toBe(400);
    expect(await signedIn.text()).toContain('This form could not be read');
  });
});
