import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { databaseKind, dropScratchDatabase } from '../support/database.ts';

/**
 * A scratch database is dropped `with (force)` while another role's backend is connected to it,
 * as an autovacuum worker may be: the role that drops it must either end that backend
 * (`pg_signal_backend`) or wait it out.
 */
describe.skipIf(databaseKind !== 'postgres')('dropping a scratch database another role is connected to', () => {
  const suffix = randomBytes(4).toString('hex');
  const password = randomBytes(12).toString('hex');
  const dropperRole = `webhooks_test_dropper_${suffix}`;
  const bystanderRole = `webhooks_test_bystander_${suffix}`;
  let admin: postgres.Sql;
  let mayCreateRoles = false;

  const config = parseConfig(process.env).database;
  const serverUrl = config.kind === 'postgres' ? config.url : '';

  function clientAs(role: string, database: string): postgres.Sql {
    const url = new URL(serverUrl);
    url.username = role;
    url.password = password;
    url.pathname = `/${database}`;
    return postgres(url.toString(), { max: 1, onnotice: () => {}, connect_timeout: 10 });
  }

  async function databaseExists(sql: postgres.Sql, name: string): Promise<boolean> {
    const rows = await sql`select 1 from pg_database where datname = ${name}`;
    return rows.length > 0;
  }

  beforeAll(async () => {
    admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
    const [role] = await admin<{ rolcreaterole: boolean }[]>`select rolcreaterole from pg_roles where rolname = current_user`;
    mayCreateRoles = role!.rolcreaterole;
    if (!mayCreateRoles) return;
    // The dropper may create databases but not signal other roles' backends: the case of an
    // autovacuum worker met by a role without pg_signal_backend.
    await admin.unsafe(`create role ${dropperRole} login createdb password '${password}'`);
    await admin.unsafe(`create role ${bystanderRole} login password '${password}'`);
  });

  afterAll(async () => {
    if (mayCreateRoles) {
      await admin.unsafe(`drop role if exists ${bystanderRole}`);
      await admin.unsafe(`drop role if exists ${dropperRole}`);
    }
    await admin.end();
  });

  it('waits until the connection it may not end has left, then drops the database', async (context) => {
    if (!mayCreateRoles) context.skip('the test role may not create roles (CONTRIBUTING.md: createrole)');
    const name = `webhooks_test_${randomBytes(6).toString('hex')}`;
    const dropper = clientAs(dropperRole, 'postgres');
    const bystander = clientAs(bystanderRole, name);
    try {
      await dropper.unsafe(`create database ${name}`);
      await bystander`select 1`;

      // The plain drop is refused: this is the failure a scratch database's teardown met.
      const refused = await dropper.unsafe(`drop database ${name} with (force)`).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(postgres.PostgresError);
      expect((refused as postgres.PostgresError).code).toBe('42501');

      const leaves = new Promise<void>((resolve) => setTimeout(() => void bystander.end().then(resolve), 1_000));
      await dropScratchDatabase(dropper, name, 30_000);
      await leaves;
      expect(await databaseExists(admin, name)).toBe(false);
    } finally {
      await bystander.end();
      await dropper.unsafe(`drop database if exists ${name}`).catch(() => {});
      await dropper.end();
    }
  });

  it('ends the connection at once when the role holds pg_signal_backend', async (context) => {
    if (!mayCreateRoles) context.skip('the test role may not create roles (CONTRIBUTING.md: createrole)');
    const [membership] = await admin<{ member: boolean }[]>`select pg_has_role(current_user, 'pg_signal_backend', 'member') as member`;
    if (!membership!.member) context.skip('the test role is not a member of pg_signal_backend (CONTRIBUTING.md)');
    const name = `webhooks_test_${randomBytes(6).toString('hex')}`;
    await admin.unsafe(`create database ${name}`);
    const bystander = clientAs(bystanderRole, name);
    try {
      await bystander`select 1`;
      await dropScratchDatabase(admin, name, 0);
      expect(await databaseExists(admin, name)).toBe(false);
      const ended = await bystander`select 1`.catch((error: unknown) => error);
      expect(ended).toBeInstanceOf(Error);
    } finally {
      await bystander.end();
    }
  });
});
