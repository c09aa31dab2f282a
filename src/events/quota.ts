/**
 * The publish quota of each project at the producers' door: PROJECT_PUBLISH_RATE events per second
 * with bursts of PROJECT_PUBLISH_BURST (or the operator's limits for the project), counted in
 * the database for every API replica (`take_publish_token`, migration 0013). A refused event is
 * not stored at all; the producer is told when to try again.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../db/client.ts';

/** The configured quota, which projects without limits of the operator's have. */
export interface PublishQuotaLimits {
  /** Events per second. */
  rate: number;
  /** Events at once above the rate. */
  burst: number;
}

/** Refusals remembered before the ones whose time has come are forgotten. */
const MAX_REMEMBERED_REFUSALS = 10_000;

/** The answer to an event at the door. */
export type QuotaDecision = { granted: true } | { granted: false; retryAfterMs: number };

/**
 * Takes one event of a project's quota. A refusal is also kept in this process until its time
 * has come: every request of the project before then would be refused too (its next arrival time
 * only moves when an event is accepted), so a project that floods the door costs the database
 * nothing more until then.
 */
export class PublishQuota {
  readonly #db: Database;
  readonly #limits: PublishQuotaLimits;
  /** Projects refused until this time (ms since the epoch). */
  readonly #refusedUntil = new Map<string, number>();

  constructor(db: Database, limits: PublishQuotaLimits) {
    this.#db = db;
    this.#limits = limits;
  }

  async take(projectId: string): Promise<QuotaDecision> {
    const now = Date.now();
    const refusedUntil = this.#refusedUntil.get(projectId);
    if (refusedUntil !== undefined) {
      if (now < refusedUntil) return { granted: false, retryAfterMs: refusedUntil - now };
      this.#refusedUntil.delete(projectId);
    }
    const [row] = await queryRows<{ granted: boolean; retry_after_ms: number }>(
      this.#db,
      sql`select granted, retry_after_ms from take_publish_token(${projectId}, ${this.#limits.rate}::float8, ${this.#limits.burst}::int)`,
    );
    if (row!.granted) return { granted: true };
    if (this.#refusedUntil.size >= MAX_REMEMBERED_REFUSALS) {
      for (const [project, until] of this.#refusedUntil) if (until <= now) this.#refusedUntil.delete(project);
    }
    this.#refusedUntil.set(projectId, now + row!.retry_after_ms);
    return { granted: false, retryAfterMs: row!.retry_after_ms };
  }
}
