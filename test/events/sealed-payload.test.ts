import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { eraseEventPayloads, recordEvent, resealEventPayloads } from '../../src/db/queries/events.ts';
import { events } from '../../src/db/schema.ts';
import { openPayload } from '../../src/db/sealing.ts';
import { newId } from '../../src/ids.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { runCli } from '../support/cli.ts';
import { openSharedTestDatabase, type SharedTestDatabase } from '../support/database.ts';
import { docauthData } from '../support/event-data.ts';
import { seedProject } from '../support/history.ts';

const oldKey = generateEncryptionKey();
const newKey = generateEncryptionKey();
const box = new SecretBox(oldKey);
let database: SharedTestDatabase;
let projectId: string;

beforeAll(async () => {
  database = await openSharedTestDatabase();
  projectId = (await seedProject(database.db, box, 1)).projectId;
}, 120_000);
afterAll(async () => {
  await database?.close();
});

const record = (data: Record<string, unknown>) =>
  recordEvent(database.db, box, { projectId, producerEventId: newId('event'), event: 'docauth.completed', occurredAt: new Date(), payload: data });
const eventRow = async (id: string) => (await database.db.select().from(events).where(eq(events.id, id)))[0]!;

it('stores the data sealed: no value of it in the row, unreadable without the key, bound to its event', async () => {
  const data = docauthData();
  const first = await record(data);
  const second = await record(docauthData());

  const [raw] = await queryRows<Record<string, unknown>>(database.db, sql`select * from events where id = ${first.event.id}`);
  const values = [data.request_id, ...Object.values(data.docauth_info)];
  const { payload_sealed: sealed, ...clear } = raw!;
  const clearText = JSON.stringify(clear);
  for (const value of values) expect(clearText).not.toContain(value);
  // The sealed text is base64, which holds any short string by chance (a country code, say):
  // its bytes are what must not carry the data.
  const sealedBytes = Buffer.concat(String(sealed).split(':').slice(2).map((part) => Buffer.from(part, 'base64')));
  for (const value of values.filter((value) => value.length >= 8)) expect(sealedBytes.includes(value)).toBe(false);
  expect(sealedBytes.includes(JSON.stringify(data.docauth_info))).toBe(false);
  expect(raw!.payload).toBeNull();
  expect(raw!.payload_sealed).toMatch(new RegExp(`^v1:${box.currentKeyId}:`));

  const row = await eventRow(first.event.id);
  expect(openPayload(box, row)).toEqual(data);
  expect(() => openPayload(new SecretBox(generateEncryptionKey()), row)).toThrow(/no encryption key with id/);
  // A sealed payload copied onto another event's row does not open there.
  const other = await eventRow(second.event.id);
  expect(() => openPayload(box, { ...other, payloadSealed: row.payloadSealed })).toThrow();
});

it('`secrets reseal` moves payloads to the new key and seals those an earlier release stored in clear', async () => {
  const sealed = await record(docauthData({ request_id: 'req-rotated' }));
  const legacyId = newId('event');
  const legacyData = docauthData({ request_id: 'req-legacy' });
  await database.db.execute(sql`
    insert into events (id, project_id, producer_event_id, event, occurred_at, payload, created_at)
    values (${legacyId}, ${projectId}, ${legacyId}, 'docauth.completed', now(), ${JSON.stringify(legacyData)}::jsonb, now())`);
  const before = await queryRows<{ count: number }>(database.db, sql`select count(*)::int as count from events`);

  const result = await runCli(['secrets', 'reseal', '--json'], {
    ...database.cliEnv,
    SECRET_ENCRYPTION_KEY: newKey,
    SECRET_ENCRYPTION_PREVIOUS_KEYS: oldKey,
  });

  expect(result.stderr).toBe('');
  expect(JSON.parse(result.stdout)).toEqual({ resealed: 1, payloads_resealed: before[0]!.count, unopenable_webhooks: [], unopenable_events: [] });
  const onlyNew = new SecretBox(newKey);
  expect(openPayload(onlyNew, await eventRow(sealed.event.id))).toMatchObject({ request_id: 'req-rotated' });
  const legacy = await eventRow(legacyId);
  expect(legacy.payloadLegacy).toBeNull();
  expect(openPayload(onlyNew, legacy)).toEqual(legacyData);
  expect(() => openPayload(box, legacy)).toThrow(/no encryption key with id/);
  // The request-id lookup hashes were remade under the new key: erasure by request id finds both.
  const erased = await eraseEventPayloads(database.db, onlyNew, projectId, { requestId: 'req-legacy' });
  expect(erased.map((event) => event.eventId)).toEqual([legacyId]);
  expect((await eraseEventPayloads(database.db, onlyNew, projectId, { requestId: 'req-rotated' })).map((e) => e.eventId)).toEqual([
    sealed.event.id,
  ]);
});

it('reseals every payload but one that does not open, which it reports and leaves as it is', async () => {
  const rotated = new SecretBox(generateEncryptionKey(), [newKey, oldKey]);
  const recorded = [];
  for (let i = 0; i < 5; i += 1) recorded.push(await record(docauthData()));
  const [first, broken] = recorded.slice(0, 2).map((one) => one.event.id) as [string, string];
  // The second event's payload altered: a sealed payload of another event copied onto it.
  const copied = (await eventRow(first)).payloadSealed;
  await database.db.update(events).set({ payloadSealed: copied }).where(eq(events.id, broken));

  // Two a batch: the broken row sits in the first one, the rest come after it.
  const result = await resealEventPayloads(database.db, rotated, 2);
  expect(result.unopenable).toEqual([broken]);
  const current = `v1:${rotated.currentKeyId}:`;
  for (const { event } of recorded) {
    const row = await eventRow(event.id);
    if (event.id === broken) expect(row.payloadSealed).toBe(copied);
    else expect(row.payloadSealed!.startsWith(current), event.id).toBe(true);
  }
  const [{ left }] = (await queryRows<{ left: number }>(database.db, sql`select count(*)::int as left from events where payload_sealed not like ${`${current}%`} or payload is not null`)) as [{ left: number }];
  expect(left).toBe(1);
});
