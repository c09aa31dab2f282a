import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DatabaseHandle } from '../src/db/client.ts';
import { insertWebhook, resealWebhookSecrets, rotateWebhookSecret } from '../src/db/queries/webhooks.ts';
import { createApiKey } from '../src/db/queries/api-keys.ts';
import { webhooks } from '../src/db/schema.ts';
import { generateEncryptionKey, generateWebhookSecret, SecretBox } from '../src/secrets/crypto.ts';
import { openWebhookHeaders, openWebhookSigningSecrets, sealWebhookHeaders } from '../src/db/sealing.ts';
import { openTestDatabase } from './support/database.ts';

let database: DatabaseHandle;
beforeAll(async () => {
  database = await openTestDatabase();
});
afterAll(() => database.close());

it('rotates the encryption key: old rows open with the previous key, reseal moves them to the new one', async () => {
  const oldKey = generateEncryptionKey();
  const newKey = generateEncryptionKey();
  const before = new SecretBox(oldKey);
  const { key } = await createApiKey(database.db, { projectId: 'p', services: ['webhooks'] });
  const secrets = [generateWebhookSecret(), generateWebhookSecret()];
  const ids: string[] = [];
  for (const secret of secrets) {
    const row = await insertWebhook(database.db, before, 'p', {
      apiKeyId: key.id, url: 'https://example.com', events: ['docauth.completed'], headers: { 'X-Tag': 'kept' }, secret,
    });
    ids.push(row.id);
  }

  expect(() => new SecretBox(newKey).open(before.seal('x'))).toThrow(/no encryption key with id/);
  const after = new SecretBox(newKey, [oldKey]);
  // One webhook a page: the reseal reads the webhooks page by page.
  expect(await resealWebhookSecrets(database.db, after, 1)).toEqual({ resealed: 2, unopenable: [] });
  expect(await resealWebhookSecrets(database.db, after, 1)).toEqual({ resealed: 0, unopenable: [] });

  const onlyNew = new SecretBox(newKey);
  for (const [i, id] of ids.entries()) {
    const [row] = await database.db.select().from(webhooks).where(eq(webhooks.id, id));
    expect(onlyNew.sealedWithOldKey(row!.secretSealed)).toBe(false);
    expect(onlyNew.sealedWithOldKey(row!.headersSealed!)).toBe(false);
    expect(openWebhookSigningSecrets(onlyNew, row!, new Date())).toEqual([secrets[i]]);
    expect(openWebhookHeaders(onlyNew, row!)).toEqual({ 'X-Tag': 'kept' });
  }
});

it('reseals the secret a rotation replaced, during its grace period, with the current one', async () => {
  const oldKey = generateEncryptionKey();
  const newKey = generateEncryptionKey();
  const before = new SecretBox(oldKey);
  const { key } = await createApiKey(database.db, { projectId: 'p-grace', services: ['webhooks'] });
  const [first, second] = [generateWebhookSecret(), generateWebhookSecret()];
  const row = await insertWebhook(database.db, before, 'p-grace', {
    apiKeyId: key.id, url: 'https://example.com', events: ['docauth.completed'], headers: {}, secret: first,
  });
  const at = new Date();
  await rotateWebhookSecret(database.db, before, row.id, { secret: second, gracePeriodSeconds: 3600, at });

  // The rows of the test before are under keys this ring lacks: only this one must open.
  expect((await resealWebhookSecrets(database.db, new SecretBox(newKey, [oldKey]))).unopenable).not.toContain(row.id);
  const [resealed] = await database.db.select().from(webhooks).where(eq(webhooks.id, row.id));
  const onlyNew = new SecretBox(newKey);
  expect(onlyNew.sealedWithOldKey(resealed!.previousSecretSealed!)).toBe(false);
  expect(openWebhookSigningSecrets(onlyNew, resealed!, at)).toEqual([second, first]);
});

it('erases, rather than reseals, a previous secret whose grace period has ended, even one under a key the ring lacks', async () => {
  const retiredKey = generateEncryptionKey();
  const oldKey = generateEncryptionKey();
  const newKey = generateEncryptionKey();
  const { key } = await createApiKey(database.db, { projectId: 'p-expired', services: ['webhooks'] });
  const [first, second] = [generateWebhookSecret(), generateWebhookSecret()];
  // The first secret sealed under a key since retired; the rotation moves it over unopened.
  const row = await insertWebhook(database.db, new SecretBox(retiredKey), 'p-expired', {
    apiKeyId: key.id, url: 'https://example.com', events: ['docauth.completed'], headers: {}, secret: first,
  });
  const at = new Date(Date.now() - 2 * 3600_000);
  await rotateWebhookSecret(database.db, new SecretBox(oldKey), row.id, { secret: second, gracePeriodSeconds: 3600, at });
  // Its headers as a later edit under the old key left them: only the previous secret is under the retired key.
  await database.db.update(webhooks).set({ headersSealed: sealWebhookHeaders(new SecretBox(oldKey), row.id, {}) }).where(eq(webhooks.id, row.id));

  const box = new SecretBox(newKey, [oldKey]);
  expect((await resealWebhookSecrets(database.db, box)).unopenable).not.toContain(row.id);
  const [resealed] = await database.db.select().from(webhooks).where(eq(webhooks.id, row.id));
  expect(resealed!.previousSecretSealed).toBeNull();
  expect(resealed!.previousSecretExpiresAt).toBeNull();
  expect(new SecretBox(newKey).sealedWithOldKey(resealed!.secretSealed)).toBe(false);
  expect(openWebhookSigningSecrets(new SecretBox(newKey), resealed!, new Date())).toEqual([second]);
});

it('refuses a tampered ciphertext', () => {
  const box = new SecretBox(generateEncryptionKey());
  const sealed = box.seal('whsec_abc');
  const parts = sealed.split(':');
  parts[4] = Buffer.from('whsec_xyz').toString('base64');
  expect(() => box.open(parts.join(':'))).toThrow();
});
