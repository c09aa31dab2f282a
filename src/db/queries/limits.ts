import { asc, eq, sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';
import { destinationLimits, projectLimits } from '../schema.ts';

/** What the operator may set for one destination (`npm run cli -- limits`); null: the configured default. */
export interface LimitOverrides {
  /** Sends in flight at most. */
  maxInFlight?: number | null;
}

/** What the operator may set for one project; null: the configured default. */
export interface ProjectLimitOverrides extends LimitOverrides {
  /** Events per second it may publish. */
  publishRate?: number | null;
  /** Events it may publish at once above its rate. */
  publishBurst?: number | null;
  /** Webhooks it may have. */
  maxWebhooks?: number | null;
  /** Sends per second of its endpoints' backlogs once their breakers close; 0: not paced. */
  recoveryRate?: number | null;
}

/** One scope's overrides as stored (a destination has `maxInFlight` only). */
export interface StoredLimits {
  scope: 'project' | 'destination';
  /** The project id, or the destination as `host:port`. */
  name: string;
  maxInFlight: number | null;
  publishRate: number | null;
  publishBurst: number | null;
  maxWebhooks: number | null;
  recoveryRate: number | null;
  updatedAt: Date;
}

const projectStored = (row: typeof projectLimits.$inferSelect): StoredLimits => ({
  scope: 'project',
  name: row.projectId,
  maxInFlight: row.maxInFlight,
  publishRate: row.publishRate,
  publishBurst: row.publishBurst,
  maxWebhooks: row.maxWebhooks,
  recoveryRate: row.recoveryRate,
  updatedAt: row.updatedAt,
});

const destinationStored = (row: typeof destinationLimits.$inferSelect): StoredLimits => ({
  scope: 'destination',
  name: row.destination,
  maxInFlight: row.maxInFlight,
  publishRate: null,
  publishBurst: null,
  maxWebhooks: null,
  recoveryRate: null,
  updatedAt: row.updatedAt,
});

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
export async function setProjectLimits(db: Database, projectId: string, overrides: ProjectLimitOverrides): Promise<StoredLimits> {
  const values = { ...overrides, updatedAt: new Date() };
  const [row] = await db
    .insert(projectLimits)
    .values({ projectId, ...values })
    .onConflictDoUpdate({ target: projectLimits.projectId, set: values })
    .returning();
  return projectStored(row!);
}

/** Sets (upserts) the overrides of a destination (`host:port`, see {@link destinationOf}). */
export async function setDestinationLimits(db: Database, destination: string, overrides: LimitOverrides): Promise<StoredLimits> {
  const values = { ...overrides, updatedAt: new Date() };
  const [row] = await db
    .insert(destinationLimits)
    .values({ destination, ...values })
    .onConflictDoUpdate({ target: destinationLimits.destination, set: values })
    .returning();
  return destinationStored(row!);
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
  return [...projects.map(projectStored), ...destinations.map(destinationStored)];
}
