import { and, asc, eq, isNull } from 'drizzle-orm';
import type { Database } from '../client.ts';
import { apiKeys, type ApiKeyRow } from '../schema.ts';
import { newId } from '../../ids.ts';
import { constantTimeEqual, randomToken, sha256Hex } from '../../secrets/crypto.ts';

const TOKEN_PATTERN = /^sk_([0-9a-hjkmnp-tv-z]{26})_([A-Za-z0-9_-]{43})$/;

/** The service an API key needs for the webhook management endpoints (and portal links). */
export const WEBHOOKS_SERVICE = 'webhooks';
/** The service a producer key needs to publish events (for its own project only). */
export const EVENTS_SERVICE = 'events';
/** Every service a key of this service may have enabled. */
export const SERVICES: readonly string[] = [WEBHOOKS_SERVICE, EVENTS_SERVICE];

/** A created key: the row and the token, which is never stored and shown only once. */
export interface CreatedApiKey {
  key: ApiKeyRow;
  token: string;
}

/** Creates an API key of `projectId` with the given services enabled. */
export async function createApiKey(
  db: Database,
  input: { projectId: string; services: string[]; name?: string | undefined },
): Promise<CreatedApiKey> {
  const id = newId('apiKey');
  const secret = randomToken(32);
  const [key] = await db
    .insert(apiKeys)
    .values({
      id,
      projectId: input.projectId,
      name: input.name ?? null,
      services: input.services,
      tokenHash: sha256Hex(secret),
      createdAt: new Date(),
    })
    .returning();
  return { key: key!, token: `sk_${id.slice('key_'.length)}_${secret}` };
}

/** Keys of a project (or of every project), oldest first. */
export async function listApiKeys(db: Database, projectId?: string): Promise<ApiKeyRow[]> {
  return db
    .select()
    .from(apiKeys)
    .where(projectId ? eq(apiKeys.projectId, projectId) : undefined)
    .orderBy(asc(apiKeys.id));
}

/** Revokes a key; returns it, or undefined when there is no such active key. */
export async function revokeApiKey(db: Database, id: string): Promise<ApiKeyRow | undefined> {
  const [key] = await db
    .update(apiKeys)
    .set({ revokedAt: new Date() })
    .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
    .returning();
  return key;
}

/** The active key with id `id` of `projectId`, if any. */
export async function findActiveApiKey(
  db: Database,
  projectId: string,
  id: string,
): Promise<ApiKeyRow | undefined> {
  const [key] = await db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.projectId, projectId), isNull(apiKeys.revokedAt)));
  return key;
}

/**
 * The key a bearer token belongs to, when the token is well formed, known and matches;
 * `undefined` otherwise. The key id is read from the token and the secret part compared
 * in constant time with the stored hash.
 */
export async function authenticateToken(db: Database, token: string): Promise<ApiKeyRow | undefined> {
  const match = TOKEN_PATTERN.exec(token);
  if (!match) return undefined;
  const [, idBody, secret] = match;
  const [key] = await db.select().from(apiKeys).where(eq(apiKeys.id, `key_${idBody}`));
  if (!key || !constantTimeEqual(key.tokenHash, sha256Hex(secret!))) return undefined;
  return key;
}
