import { asc, eq, sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';
import { destinationLimits, projectLimits } from '../schema.ts';

/** What the operator may set for one project or one destination (`npm run cli -- limits`). */
export interface LimitOverrides {
  /** Sends in flight at most; null: the configured default. */
  maxInFlight?: number | null;
}

/** One scope's overrides as stored. */
export interface StoredLimits {
  scope: 'project' | 'destination';
  /** The project id, or the destination as `host:port`. */
  name: string;
  maxInFlight: number | null;
  updatedAt: Date;
}

/**
 * The destination a host, `host:port` or URL names, as sends are counted: the same function
 * that computes `webhooks.destination` from a webhook's URL (migration 0009), so that the
 * operator's spelling (`Hooks.Example.com`, `hooks.example.com:443`, a full URL) always means
 * the webhooks' own. Undefined when it names no host.
 */
export async function destinationOf(db: Database, value: string): Promise<string | undefined> {
  const url = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value) ? value : `https://${value}`;
  const [row] = await queryRows<{ destination: string | null }>(db, sql`select url_destination(${url}) as destination`);
  const destination = row?.destination ?? undefined;
  return destination && !destination.startsWith(':') ? destination : undefined;
}

/** Sets (upserts) the overrides of a project; a field left undefined keeps its value, null clears it. */
export async function setProjectLimits(db: Database, projectId: string, overrides: LimitOverrides): Promise<StoredLimits> {
  const values = { ...overrides, updatedAt: new Date() };
  const [row] = await db
    .insert(projectLimits)
    .values({ projectId, ...values })
    .onConflictDoUpdate({ target: projectLimits.projectId, set: values })
    .returning();
  return { scope: 'project', name: row!.projectId, maxInFlight: row!.maxInFlight, updatedAt: row!.updatedAt };
}

/** Sets (upserts) the overrides of a destination (`host:port`, see {@link destinationOf}). */
export async function setDestinationLimits(db: Database, destination: string, overrides: LimitOverrides): Promise<StoredLimits> {
  const values = { ...overrides, updatedAt: new Date() };
  const [row] = await db
    .insert(destinationLimits)
    .values({ destination, ...values })
    .onConflictDoUpdate({ target: destinationLimits.destination, set: values })
    .returning();
  return { scope: 'destination', name: row!.destination, maxInFlight: row!.maxInFlight, updatedAt: row!.updatedAt };
}

/** Removes every override of a project, or of a destination; answers whether there were any. */
export async function resetLimits(db: Database, scope: StoredLimits['scope'], name: string): Promise<boolean> {
  const removed =
    scope === 'project'
      ? await db.delete(projectLimits).where(eq(projectLimits.projectId, name)).returning({ name: projectLimits.projectId })
      : await db.delete(destinationLimits).where(eq(destinationLimits.destination, name)).returning({ name: destinationLimits.destination });
  return removed.length > 0;
}

/** Every override the operator has set: projects, then destinations, each by name. */
export async function listLimits(db: Database): Promise<StoredLimits[]> {
  const projects = await db.select().from(projectLimits).orderBy(asc(projectLimits.projectId));
  const destinations = await db.select().from(destinationLimits).orderBy(asc(destinationLimits.destination));
  return [
    ...projects.map((row) => ({ scope: 'project' as const, name: row.projectId, maxInFlight: row.maxInFlight, updatedAt: row.updatedAt })),
    ...destinations.map((row) => ({ scope: 'destination' as const, name: row.destination, maxInFlight: row.maxInFlight, updatedAt: row.updatedAt })),
  ];
}
