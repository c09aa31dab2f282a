import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';
import { PortalVisitor } from './support.ts';

const BASE = '/api-gateway/v2';

let h: Harness;
let key: { id: string; projectId: string; token: string };
let visitor: PortalVisitor;

beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
  visitor = new PortalVisitor(h);
  await visitor.signIn(key.token);
});
afterAll(() => h.stop());

async function apiWebhook(id: string, token = key.token) {
  return h.request('GET', `${BASE}/webhooks/${id}`, { token });
}

/** Posts a change that makes a secret, and follows its redirect to the page that shows it. */
async function secretShownAfter(path: string, fields: Record<string, string> = {}) {
  const changed = await visitor.post(path, fields);
  expect(changed.status).toBe(303);
  expect(changed.location).toMatch(/^\/portal\/webhooks\/wh_[0-9a-z]{26}\/secret$/);
  const page = await visitor.get(changed.location!);
  expect(page.status).toBe(200);
  return { page, secretPath: changed.location!, secret: /value="(whsec_[^"]+)"/.exec(page.html)![1]! };
}

async function createdThroughPortal(url: string, headers = '') {
  const { page, secretPath, secret } = await secretShownAfter('/portal/webhooks', { url, events: 'docauth.completed', headers });
  expect(page.html).toContain('Endpoint added');
  const id = /href="\/portal\/webhooks\/(wh_[0-9a-z]{26})"/.exec(page.html)![1]!;
  return { id, secret, page, secretPath };
}

describe('endpoints through the portal', () => {
  it('creates one as the session\'s API key, showing the secret once', async () => {
    const { id, secret } = await createdThroughPortal('https://example.com/portal', 'X-Team: payments\nX-Env: prod');
    const stored = await apiWebhook(id);
    expect(stored.body.data).toMatchObject({
      url: 'https://example.com/portal',
      api_key_id: key.id,
      project_id: key.projectId,
      headers: { 'X-Team': 'payments', 'X-Env': 'prod' },
    });
    expect(secret).toMatch(/^whsec_/);
    const shown = await visitor.get(`/portal/webhooks/${id}`);
    expect(shown.status).toBe(200);
    expect(shown.html).toContain('https://example.com/portal');
    expect(shown.html).not.toContain(secret);
  });

  it('answers the change with a redirect, so a reload of the secret\'s page neither adds the endpoint again nor shows the secret again', async () => {
    const before = (await h.request('GET', `${BASE}/webhooks`, { token: key.token })).body.data.length;
    const { id, secret, secretPath } = await createdThroughPortal('https://example.com/reloaded');
    const reloaded = await visitor.get(secretPath);
    expect(reloaded.status).toBe(303);
    expect(reloaded.location).toBe(`/portal/webhooks/${id}?done=secret-shown`);
    expect(reloaded.html).not.toContain(secret);
    const endpoint = await visitor.get(reloaded.location!);
    expect(endpoint.html).toContain('Its signing secret was shown once');
    expect(endpoint.html).not.toContain(secret);
    expect((await h.request('GET', `${BASE}/webhooks`, { token: key.token })).body.data.length).toBe(before + 1);

    // Another session of the project never sees a secret this one has still to show.
    const rotated = await visitor.post(`/portal/webhooks/${id}/rotate-secret`);
    const other = new PortalVisitor(h);
    await other.signIn(key.token);
    expect((await other.get(rotated.location!)).status).toBe(303);
    const fresh = await visitor.get(rotated.location!);
    expect(fresh.html).toContain('Secret rotated');
    expect(/value="(whsec_[^"]+)"/.exec(fresh.html)![1]).not.toBe(secret);
  });

  it("keeps each endpoint's new secret for its own page, when two are changed before either page is opened", async () => {
    const first = await createdThroughPortal('https://example.com/two-tabs-a');
    const second = await createdThroughPortal('https://example.com/two-tabs-b');
    const rotatedFirst = await visitor.post(`/portal/webhooks/${first.id}/rotate-secret`);
    const rotatedSecond = await visitor.post(`/portal/webhooks/${second.id}/rotate-secret`);
    // Another endpoint's page opened first takes nothing of this one's.
    const shownSecond = await visitor.get(rotatedSecond.location!);
    const shownFirst = await visitor.get(rotatedFirst.location!);
    const secretOf = (page: { html: string }) => /value="(whsec_[^"]+)"/.exec(page.html)?.[1];
    expect([shownFirst.status, shownSecond.status]).toEqual([200, 200]);
    expect(new Set([secretOf(shownFirst), secretOf(shownSecond), first.secret, second.secret]).size).toBe(4);
  });

  it('shows the API\'s own message for a refused field, keeps the input, and writes nothing', async () => {
    const before = (await h.request('GET', `${BASE}/webhooks`, { token: key.token })).body.data.length;
    const refused = await visitor.post('/portal/webhooks', { url: 'http://example.com/plain', events: 'docauth.completed', headers: 'Content-Type: text/plain' });
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('url: must use https');
    expect(refused.html).toContain('headers.Content-Type: is set by the service and cannot be overridden');
    expect(refused.html).toContain('value="http://example.com/plain"');
    expect(refused.html).toMatch(/id="url"[^>]*aria-invalid="true"/);
    const noEvents = await visitor.post('/portal/webhooks', { url: 'https://example.com/x' });
    expect(noEvents.status).toBe(400);
    expect(noEvents.html).toContain('events: must list at least one event');
    const badLine = await visitor.post('/portal/webhooks', { url: 'https://example.com/x', events: 'docauth.completed', headers: 'no colon here' });
    expect(badLine.html).toContain('headers: line 1 must be');
    expect((await h.request('GET', `${BASE}/webhooks`, { token: key.token })).body.data.length).toBe(before);
  });

  it('edits url, events, status, headers and rate limit, and escapes what it shows', async () => {
    const { id } = await createdThroughPortal('https://example.com/before');
    const refused = await visitor.post(`/portal/webhooks/${id}`, { url: 'https://example.com/before', events: 'docauth.completed', headers: '', rate_limit: 'fast' });
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('rate_limit: must be a number of deliveries per second');
    expect(refused.html).toMatch(/id="rate_limit"[^>]*value="fast"[^>]*aria-invalid="true"/);
    const saved = await visitor.post(`/portal/webhooks/${id}`, {
      url: 'https://example.com/after?a=1&b=2',
      events: 'docauth.completed',
      status: 'disabled',
      headers: 'X-Quote: "<i>"',
      rate_limit: '2.5',
    });
    expect(saved.status).toBe(303);
    expect(saved.location).toBe(`/portal/webhooks/${id}?done=updated`);
    const page = await visitor.get(saved.location!);
    expect(page.html).toContain('Endpoint saved.');
    expect(page.html).toContain('https://example.com/after?a=1&amp;b=2');
    expect(page.html).toContain('X-Quote: &quot;&lt;i&gt;&quot;');
    expect(page.html).not.toContain('<i>');
    expect(page.html).toContain('Test events need an active endpoint.');
    expect(page.html).toContain('2.5 per second');
    expect(page.html).toMatch(/<dt>Circuit breaker<\/dt><dd>closed<\/dd>/);
    expect((await apiWebhook(id)).body.data).toMatchObject({ status: 'disabled', headers: { 'X-Quote': '"<i>"' }, rate_limit: 2.5 });
    const cleared = await visitor.post(`/portal/webhooks/${id}`, { url: 'https://example.com/after', events: 'docauth.completed', headers: '', rate_limit: '' });
    expect(cleared.status).toBe(303);
    expect((await apiWebhook(id)).body.data).not.toHaveProperty('rate_limit');
  });

  it('saves only what the customer changed in the form: not a status the service set, nor a rate limit the API set, since the page loaded', async () => {
    const { id } = await createdThroughPortal('https://example.com/stale', 'X-Old: 1');
    const edit = await visitor.get(`/portal/webhooks/${id}/edit`);
    expect(edit.status).toBe(200);
    const loaded = /name="loaded" value="([^"]*)"/.exec(edit.html)![1]!.replaceAll('&quot;', '"').replaceAll('&amp;', '&');
    // Meanwhile the service disables the failing endpoint, and an API client sets a rate limit.
    await h.db.execute(sql`update webhooks set status = 'disabled', disabled_at = now(), disabled_reason = 'every attempt has failed since yesterday' where id = ${id}`);
    expect((await h.request('PATCH', `${BASE}/webhooks/${id}`, { token: key.token, body: { rate_limit: 3 } })).status).toBe(200);

    // The form as the page showed it, one header changed (a browser posts the textarea with CRLF).
    const saved = await visitor.post(`/portal/webhooks/${id}`, {
      url: 'https://example.com/stale',
      events: 'docauth.completed',
      status: 'active',
      headers: 'X-Old: 1\r\nX-New: 2',
      rate_limit: '',
      loaded,
    });
    expect(saved.status).toBe(303);
    const after = (await apiWebhook(id)).body.data;
    expect(after).toMatchObject({ status: 'disabled', disabled_reason: 'every attempt has failed since yesterday', rate_limit: 3, headers: { 'X-Old': '1', 'X-New': '2' } });

    // Saved again with nothing changed: nothing is written.
    const edited = await visitor.get(`/portal/webhooks/${id}/edit`);
    const again = /name="loaded" value="([^"]*)"/.exec(edited.html)![1]!.replaceAll('&quot;', '"').replaceAll('&amp;', '&');
    const unchanged = await visitor.post(`/portal/webhooks/${id}`, {
      url: 'https://example.com/stale', events: 'docauth.completed', status: 'disabled', headers: 'X-Old: 1\nX-New: 2', rate_limit: '3', loaded: again,
    });
    expect(unchanged.status).toBe(303);
    expect((await apiWebhook(id)).body.data.updated_at).toBe(after.updated_at);
  });

  it('rotates the secret behind a confirmation and shows the new one once', async () => {
    const { id, secret } = await createdThroughPortal('https://example.com/rotate');
    const asked = await visitor.get(`/portal/webhooks/${id}/rotate-secret`);
    expect(asked.html).toContain('Replace the signing secret');
    const { page: rotated, secret: fresh } = await secretShownAfter(`/portal/webhooks/${id}/rotate-secret`);
    expect(rotated.html).toContain('Secret rotated');
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(secret);
    expect(rotated.headers.get('Cache-Control')).toBe('no-store');
    expect((await apiWebhook(id)).body.data).not.toHaveProperty('previous_secret_expires_at');
  });

  it('rotates with a grace period chosen in the form, and the endpoint page says until when the old secret signs', async () => {
    const { id } = await createdThroughPortal('https://example.com/rotate-grace');
    const asked = await visitor.get(`/portal/webhooks/${id}/rotate-secret`);
    expect(asked.html).toContain('<option value="86400">24 hours</option>');
    const { page: rotated } = await secretShownAfter(`/portal/webhooks/${id}/rotate-secret`, { grace_period: '86400' });
    const { previous_secret_expires_at: expiresAt } = (await apiWebhook(id)).body.data;
    expect(Date.parse(expiresAt) - Date.now()).toBeGreaterThan(86_300_000);
    expect(rotated.html).toContain(`The previous secret also signs until ${expiresAt}.`);
    const shown = await visitor.get(`/portal/webhooks/${id}`);
    expect(shown.html).toContain('The previous secret also signs until');
  });

  it('turns the Standard Webhooks headers on and off from the form', async () => {
    const { id } = await createdThroughPortal('https://example.com/standard');
    expect((await apiWebhook(id)).body.data.standard_webhooks).toBe(false);
    const on = await visitor.post(`/portal/webhooks/${id}`, { url: 'https://example.com/standard', events: 'docauth.completed', headers: '', rate_limit: '', standard_webhooks: 'true' });
    expect(on.status).toBe(303);
    expect((await apiWebhook(id)).body.data.standard_webhooks).toBe(true);
    const shown = await visitor.get(`/portal/webhooks/${id}`);
    expect(shown.html).toContain('X-Service-Signature and Standard Webhooks (webhook-signature)');
    const edit = await visitor.get(`/portal/webhooks/${id}/edit`);
    expect(edit.html).toMatch(/name="standard_webhooks" value="true"[^>]* checked/);
    await visitor.post(`/portal/webhooks/${id}`, { url: 'https://example.com/standard', events: 'docauth.completed', headers: '', rate_limit: '' });
    expect((await apiWebhook(id)).body.data.standard_webhooks).toBe(false);
  });

  it('deletes behind a confirmation', async () => {
    const { id } = await createdThroughPortal('https://example.com/delete');
    const asked = await visitor.get(`/portal/webhooks/${id}/delete`);
    expect(asked.html).toContain('Delete the endpoint https://example.com/delete?');
    const deleted = await visitor.post(`/portal/webhooks/${id}/delete`);
    expect(deleted.location).toBe('/portal?done=deleted');
    expect((await apiWebhook(id)).status).toBe(404);
    const gone = await visitor.get(`/portal/webhooks/${id}`);
    expect(gone.status).toBe(404);
    expect(gone.html).toContain(`webhook ${id} not found`);
  });

  it('sends a test event to that endpoint only, and refuses one to a disabled endpoint', async () => {
    const target = await createdThroughPortal('https://example.com/test-target');
    const bystander = await createdThroughPortal('https://example.com/bystander');
    const sent = await visitor.post(`/portal/webhooks/${target.id}/test-events`);
    expect(sent.status).toBe(303);
    const deliveryId = /deliveries\/(dlv_[0-9a-z]{26})\?done=test-sent$/.exec(sent.location!)![1]!;
    const deliveries = await h.request('GET', `${BASE}/webhooks/${target.id}/deliveries`, { token: key.token });
    expect(deliveries.body.data.map((d: { id: string }) => d.id)).toEqual([deliveryId]);
    expect((await h.request('GET', `${BASE}/webhooks/${bystander.id}/deliveries`, { token: key.token })).body.data).toEqual([]);
    const page = await visitor.get(sent.location!);
    expect(page.html).toContain('Test event sent.');
    expect(page.html).toContain('data-live="3000"');

    await h.request('PATCH', `${BASE}/webhooks/${target.id}`, { token: key.token, body: { status: 'disabled' } });
    const refused = await visitor.post(`/portal/webhooks/${target.id}/test-events`);
    expect(refused.status).toBe(409);
    expect(refused.html).toContain('is disabled; set its status to active to send a test event');
  });

  it('filters deliveries with the API\'s rules', async () => {
    const { id } = await createdThroughPortal('https://example.com/filters');
    const bad = await visitor.get(`/portal/webhooks/${id}?status=lost`);
    expect(bad.status).toBe(400);
    expect(bad.html).toContain('status: must be one of');
    const none = await visitor.get(`/portal/webhooks/${id}?status=delivered`);
    expect(none.html).toContain('No delivery matches these filters.');
  });
});

describe('another project', () => {
  it('never shows or changes through this session', async () => {
    const stranger = await h.createKey();
    const theirs = await h.request('POST', `${BASE}/webhooks`, {
      token: stranger.token,
      body: { api_key_id: stranger.id, url: 'https://stranger.example.com/secret-endpoint', events: ['docauth.completed'] },
    });
    const theirId = theirs.body.data.id as string;
    const home = await visitor.get('/portal');
    expect(home.html).not.toContain('stranger.example.com');
    for (const path of [`/portal/webhooks/${theirId}`, `/portal/webhooks/${theirId}/edit`, `/portal/webhooks/${theirId}/delete`]) {
      const page = await visitor.get(path);
      expect(page.status).toBe(403);
      expect(page.html).toContain('belongs to another project');
      expect(page.html).not.toContain('stranger.example.com');
    }
    expect((await visitor.post(`/portal/webhooks/${theirId}/delete`)).status).toBe(403);
    expect((await visitor.post(`/portal/webhooks/${theirId}`, { url: 'https://evil.example.com', events: 'docauth.completed' })).status).toBe(403);
    expect((await visitor.post(`/portal/webhooks/${theirId}/test-events`)).status).toBe(403);
    const still = await apiWebhook(theirId, stranger.token);
    expect(still.body.data.url).toBe('https://stranger.example.com/secret-endpoint');
    expect((await h.request('GET', `${BASE}/webhooks/${theirId}/deliveries`, { token: stranger.token })).body.data).toEqual([]);
  });
});

describe('POST /webhooks/{id}/test-events (API)', () => {
  it('answers 202 with the event and its one delivery', async () => {
    const made = await h.request('POST', `${BASE}/webhooks`, {
      token: key.token,
      body: { api_key_id: key.id, url: 'https://example.com/api-test', events: ['docauth.completed'] },
    });
    const sent = await h.request('POST', `${BASE}/webhooks/${made.body.data.id}/test-events`, { token: key.token });
    expect(sent.status).toBe(202);
    expect(sent.body.data.event_id).toMatch(/^evt_/);
    const delivery = await h.request('GET', `${BASE}/webhooks/${made.body.data.id}/deliveries/${sent.body.data.delivery_id}`, { token: key.token });
    expect(delivery.body.data).toMatchObject({ event: 'docauth.completed', webhook_config_id: made.body.data.id });
  });
});
