import { and, eq, exists, gt, isNull, lt } from 'drizzle-orm';
import type { Database } from '../client.ts';
import { apiKeys, portalSecretReveals, portalSessions, type ApiKeyRow, type PortalSessionRow } from '../schema.ts';
import { openSecretReveal, sealSecretReveal, type SecretReveal } from '../sealing.ts';
import { newId } from '../../ids.ts';
import { constantTimeEqual, randomToken, sha256Hex, type SecretBox } from '../../secrets/crypto.ts';

/** How long a minted link can be opened. */
export const PORTAL_LINK_TTL_MS = 10 * 60_000;
/** How long a browser session lasts after its link is opened. */
export const PORTAL_SESSION_TTL_MS = 60 * 60_000;

/** How long finished sessions are kept (for a look at recent sign-ins) before minting deletes them. */
const FINISHED_SESSION_KEEP_MS = 24 * 60 * 60_000;

const ID_BODY = '[0-9a-hjkmnp-tv-z]{26}';
const LINK_TOKEN = new RegExp(`^plt_(${ID_BODY})_([A-Za-z0-9_-]{43})$`);
const SESSION_TOKEN = new RegExp(`^pss_(${ID_BODY})_([A-Za-z0-9_-]{43})$`);

/** A minted link: the session row and the one-time token, which is never stored. */
export interface MintedPortalLink {
  session: PortalSessionRow;
  token: string;
}

/**
 * Mints a one-time portal link for the project of `apiKey`, acting as that key. The project's
 * sessions that ended more than a day ago are deleted on the way, so the table holds only
 * recent sessions without a sweep of its own.
 */
export async function mintPortalLink(db: Database, apiKey: Pick<ApiKeyRow, 'id' | 'projectId'>, now = new Date()): Promise<MintedPortalLink> {
  const id = newId('portalSession', now.getTime());
  const secret = randomToken(32);
  const linkExpiresAt = new Date(now.getTime() + PORTAL_LINK_TTL_MS);
  await db
    .delete(portalSessions)
    .where(and(eq(portalSessions.projectId, apiKey.projectId), lt(portalSessions.expiresAt, new Date(now.getTime() - FINISHED_SESSION_KEEP_MS))));
  const [session] = await db
    .insert(portalSessions)
    .values({
      id,
      projectId: apiKey.projectId,
      apiKeyId: apiKey.id,
      linkHash: sha256Hex(secret),
      linkExpiresAt,
      expiresAt: linkExpiresAt,
      createdAt: now,
    })
    .returning();
  return { session: session!, token: `plt_${id.slice('ps_'.length)}_${secret}` };
}

/** The session id of a link token whose secret matches its stored hash, with the link's state. */
async function matchLink(db: Database, token: string) {
  const match = LINK_TOKEN.exec(token);
  if (!match) return undefined;
  const id = `ps_${match[1]}`;
  const [stored] = await db
    .select({ linkHash: portalSessions.linkHash, redeemedAt: portalSessions.redeemedAt, linkExpiresAt: portalSessions.linkExpiresAt, keyRevokedAt: apiKeys.revokedAt })
    .from(portalSessions)
    .innerJoin(apiKeys, eq(apiKeys.id, portalSessions.apiKeyId))
    .where(eq(portalSessions.id, id));
  if (!stored || !constantTimeEqual(stored.linkHash, sha256Hex(match[2]!))) return undefined;
  return { id, idBody: match[1]!, redeemedAt: stored.redeemedAt, linkExpiresAt: stored.linkExpiresAt, keyRevoked: stored.keyRevokedAt !== null };
}

/** Whether a link can still be opened (known, unexpired, not opened before, its key not revoked), without opening it. */
export async function portalLinkOpenable(db: Database, token: string, now = new Date()): Promise<boolean> {
  const link = await matchLink(db, token);
  return link !== undefined && link.redeemedAt === null && link.linkExpiresAt > now && !link.keyRevoked;
}

/**
 * Opens a link: when the token is known, unexpired, not opened before and its key not revoked,
 * the session starts and its cookie token (never stored) is returned. One statement, so a link
 * opens once even when two requests race for it (or its key's revocation).
 */
export async function redeemPortalLink(db: Database, token: string, now = new Date()): Promise<{ session: PortalSessionRow; sessionToken: string } | undefined> {
  const link = await matchLink(db, token);
  if (!link) return undefined;
  const secret = randomToken(32);
  const [session] = await db
    .update(portalSessions)
    .set({ redeemedAt: now, sessionHash: sha256Hex(secret), expiresAt: new Date(now.getTime() + PORTAL_SESSION_TTL_MS) })
    .where(
      and(
        eq(portalSessions.id, link.id),
        isNull(portalSessions.redeemedAt),
        gt(portalSessions.linkExpiresAt, now),
        exists(db.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, portalSessions.apiKeyId), isNull(apiKeys.revokedAt)))),
      ),
    )
    .returning();
  if (!session) return undefined;
  return { session, sessionToken: `pss_${link.idBody}_${secret}` };
}

/**
 * The live session a cookie token belongs to, with the API key it acts as: undefined when the
 * token is unknown, the session expired or ended, or the key was revoked.
 */
export async function authenticatePortalSession(
  db: Database,
  token: string,
  now = new Date(),
): Promise<{ session: PortalSessionRow; apiKey: ApiKeyRow } | undefined> {
  const match = SESSION_TOKEN.exec(token);
  if (!match) return undefined;
  const [row] = await db
    .select({ session: portalSessions, apiKey: apiKeys })
    .from(portalSessions)
    .innerJoin(apiKeys, eq(apiKeys.id, portalSessions.apiKeyId))
    .where(and(eq(portalSessions.id, `ps_${match[1]}`), isNull(portalSessions.endedAt), gt(portalSessions.expiresAt, now)));
  if (!row?.session.sessionHash || !constantTimeEqual(row.session.sessionHash, sha256Hex(match[2]!))) return undefined;
  if (row.apiKey.revokedAt) return undefined;
  return row;
}

/** Ends a session (sign out), and drops the secrets it had still to show. */
export async function endPortalSession(db: Database, id: string, now = new Date()): Promise<void> {
  await db.update(portalSessions).set({ endedAt: now, expiresAt: now }).where(eq(portalSessions.id, id));
  await db.delete(portalSecretReveals).where(eq(portalSecretReveals.sessionId, id));
}

/** Keeps a webhook's new signing secret for the one page of the session that shows it (replacing one of that webhook not shown). */
export async function keepSecretReveal(db: Database, box: SecretBox, sessionId: string, reveal: SecretReveal): Promise<void> {
  const kept = { secretSealed: sealSecretReveal(box, sessionId, reveal), createdAt: new Date() };
  await db
    .insert(portalSecretReveals)
    .values({ sessionId, webhookId: reveal.webhookId, ...kept })
    .onConflictDoUpdate({ target: [portalSecretReveals.sessionId, portalSecretReveals.webhookId], set: kept });
}

/**
 * Takes the secret of a webhook the session has still to show: one statement that reads and
 * deletes it, so it is shown once, whatever requests race for it. One that no longer opens (its
 * key retired since) is as good as shown.
 */
export async function takeSecretReveal(db: Database, box: SecretBox, sessionId: string, webhookId: string): Promise<SecretReveal | undefined> {
  const [row] = await db
    .delete(portalSecretReveals)
    .where(and(eq(portalSecretReveals.sessionId, sessionId), eq(portalSecretReveals.webhookId, webhookId)))
    .returning({ sealed: portalSecretReveals.secretSealed });
  if (!row) return undefined;
  try {
    return openSecretReveal(box, sessionId, webhookId, row.sealed);
  } catch {
    return undefined;
  }
}
