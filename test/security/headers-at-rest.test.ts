import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { resealWebhookSecrets } from '../../src/db/queries/webhooks.ts';
import { newId } from '../../src/ids.ts';
import { generateWebhookSecret } from '../../src/secrets/crypto.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/*
 * Finding: a webhook's custom headers (often a credential for the customer's own endpoint)
 * were stored in clear, where a database dump or a backup shows them. They are now sealed at
 * rest like event payloads, still returned by the API, and `secrets reseal` seals the rows an
 * earlier release wrote in clear.
 */

const WEBHOOKS = '/api-gateway/v2/webhooks';

let h: Harness;
let key: { id: string; projectId: string; token: string };
beforeAll(async () => {
  h = await startHarness();
  key = await h.createKey();
});
afterAll(() => h?.stop());

const credential = () => `Bearer endpoint-credential-${randomUUID()}`;
const storedRow = async (id: string) =>
  (await queryRows<Record<string, unknown>>(h.db, sql`select * from webhooks where id = ${id}`))[0]!;

describe('custom headers at rest', () => {
  it('are sealed in the database, and returned by create, get and update as they were set', async () => {
    const value = credential();
    const created = await h.request('POST', WEBHOOKS, {
      token: key.token,
      body: { api_key_id: key.id, url: 'https://example.com/hooks', events: ['docauth.completed'], headers: { Authorization: value } },
    });
    expect(created.status).toBe(201);
    expect(created.body.data.headers).toEqual({ Authorization: value });
    const id: string = created.body.data.id;
    const row = JSON.stringify(await storedRow(id));
    expect(row).not.toContain(value);
    expect(row).not.toContain('endpoint-credential');

    expect((await h.request('GET', `${WEBHOOKS}/${id}`, { token: key.token })).body.data.headers).toEqual({ Authorization: value });
    const changed = credential();
    const updated = await h.request('PATCH', `${WEBHOOKS}/${id}`, { token: key.token, body: { headers: { Authorization: changed } } });
    expect(updated.body.data.headers).toEqual({ Authorization: changed });
    expect(JSON.stringify(await storedRow(id))).not.toContain(changed);
  });

  it('of a row an earlier release wrote in clear are still returned, and sealed by secrets reseal', async () => {
    const value = credential();
    const id = newId('webhook');
    // The row as releases before sealing wrote it: headers in clear, the secret sealed without its id.
    await h.db.execute(sql`
      insert into webhooks (id, project_id, api_key_id, url, events, status, headers, secret_sealed, created_at, updated_at)
      values (${id}, ${key.projectId}, ${key.id}, 'https://example.com/legacy', array['docauth.completed'], 'active',
              ${JSON.stringify({ Authorization: value })}::jsonb, ${h.secretBox.seal(generateWebhookSecret())}, now(), now())`);
    expect((await h.request('GET', `${WEBHOOKS}/${id}`, { token: key.token })).body.data.headers).toEqual({ Authorization: value });

    expect((await resealWebhookSecrets(h.db, h.secretBox)).resealed).toBe(1);
    const row = await storedRow(id);
    expect(row['headers']).toBeNull();
    expect(JSON.stringify(row)).not.toContain(value);
    expect((await h.request('GET', `${WEBHOOKS}/${id}`, { token: key.token })).body.data.headers).toEqual({ Authorization: value });
    expect((await resealWebhookSecrets(h.db, h.secretBox)).resealed).toBe(0);
  });
});
