/**
 * The publish quota of each project at the producers' door: PROJECT_PUBLISH_RATE events per second
 * with bursts of PROJECT_PUBLISH_BURST (or the operator's limits for the project), counted in
 * the database for every API replica (`take_publish_token`, migration 0013). A refused event is
 * not stored at all; the producer is told when to try again.
 */
import { createHash } from 'node:crypto';
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

/** How long a refusal is remembered at most, so that a quota the operator raises reaches a project held back within it. */
const REMEMBER_REFUSAL_MS = 1000;

/** The answer to an event at the door. */
export type QuotaDecision = { granted: true } | { granted: false; retryAfterMs: number };

/**
 * A refusal remembered for a while: for the project, and for the credential it came with. Its times
 * are on the monotonic clock (`performance.now()`), so a step of the wall clock neither keeps a
 * project refused nor forgets its refusal early.
 */
interface Refusal {
  projectId: string;
  /** When the project may publish again, as far as its quota knew then. */
  retryAt: number;
  /** When it is forgotten: its time, or {@link REMEMBER_REFUSAL_MS} at most. */
  until: number;
}

/**
 * Takes one event of a project's quota. A refusal is also kept in this process until its time
 * has come, for a second at most: every request of the project before then would be refused too
 * (its next arrival time only moves when an event is accepted, or the operator raises its
 * quota), so a project that floods the door costs the database one statement a second at most.
 */
export class PublishQuota {
  readonly #db: Database;
  readonly #limits: PublishQuotaLimits;
  /** Refusals by project id, and by the digest of the producer credential that was refused. */
  readonly #refusals = new Map<string, Refusal>();

  constructor(db: Database, limits: PublishQuotaLimits) {
    this.#db = db;
    this.#limits = limits;
  }

  /**
   * The refusal still standing for a producer credential (its bearer token), if an event it
   * brought was refused moments ago: its requests are refused again before anything else is done
   * (no database lookup, no body read) for a while, so a project flooding the door costs the
   * service little. Only the full, valid credential finds it.
   */
  refusedCredential(credential: string): { projectId: string; retryAfterMs: number } | undefined {
    // Nothing refused in this process: no digest to make.
    if (this.#refusals.size === 0) return undefined;
    const refusal = this.#standing(credentialKey(credential));
    return refusal && { projectId: refusal.projectId, retryAfterMs: refusal.retryAt - performance.now() };
  }

  /** Takes one event of a project's quota; a refusal is remembered for the project and for `credential` (the producer's token). */
  async take(projectId: string, credential?: string): Promise<QuotaDecision> {
    const standing = this.#standing(projectId);
    if (standing) return { granted: false, retryAfterMs: standing.retryAt - performance.now() };
    const [row] = await queryRows<{ granted: boolean; retry_after_ms: number }>(
      this.#db,
      sql`select granted, retry_after_ms from take_publish_token(${projectId}, ${this.#limits.rate}::float8, ${this.#limits.burst}::int)`,
    );
    if (row!.granted) return { granted: true };
    const now = performance.now();
    const refusal = { projectId, retryAt: now + row!.retry_after_ms, until: now + Math.min(row!.retry_after_ms, REMEMBER_REFUSAL_MS) };
    this.#remember(projectId, refusal);
    if (credential !== undefined) this.#remember(credentialKey(credential), refusal);
    return { granted: false, retryAfterMs: row!.retry_after_ms };
  }

  #standing(key: string): Refusal | undefined {
    const refusal = this.#refusals.get(key);
    if (refusal && refusal.until > performance.now()) return refusal;
    if (refusal) this.#refusals.delete(key);
    return undefined;
  }

  #remember(key: string, refusal: Refusal): void {
    if (this.#refusals.size >= MAX_REMEMBERED_REFUSALS) {
      const now = performance.now();
      for (const [other, { until }] of this.#refusals) if (until <= now) this.#refusals.delete(other);
    }
    this.#refusals.set(key, refusal);
  }
}

/** How a credential is remembered: a digest, never the token itself; apart from project ids. */
const credentialKey = (credential: string) => `credential:${createHash('sha256').update(credential).digest('base64url')}`;
