import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

/** A new webhook signing secret: `whsec_` and 32 bytes from the CSPRNG, base64. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** A new AES-256 key, base64 (the form SECRET_ENCRYPTION_KEY takes). */
export function generateEncryptionKey(): string {
  return randomBytes(32).toString('base64');
}

/** Whether a value is usable as SECRET_ENCRYPTION_KEY: 32 bytes, base64. */
export function isEncryptionKey(base64Key: string): boolean {
  return Buffer.from(base64Key, 'base64').length === 32;
}

/** A random URL-safe token body of `bytes` bytes. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** SHA-256 hex digest, the stored form of API key tokens. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time comparison of two strings (false when lengths differ). */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

const CIPHERTEXT_VERSION = 'v1';

/**
 * Encrypts webhook secrets at rest with AES-256-GCM. The stored form is
 * `v1:<key id>:<iv>:<auth tag>:<ciphertext>` (base64 parts); the key id is the first
 * 8 hex digits of the key's SHA-256, so a row names the key that sealed it.
 */
export class SecretBox {
  readonly #keys = new Map<string, Buffer>();
  /** Per key id, the HMAC key of {@link lookupHash}, derived once from the encryption key. */
  readonly #lookupKeys = new Map<string, Buffer>();
  readonly #currentKeyId: string;

  /**
   * @param currentKey base64 of 32 bytes: seals new secrets.
   * @param previousKeys base64 keys still accepted for opening rows sealed before a key rotation.
   */
  constructor(currentKey: string, previousKeys: readonly string[] = []) {
    this.#currentKeyId = this.#addKey(currentKey);
    for (const key of previousKeys) this.#addKey(key);
  }

  #addKey(base64Key: string): string {
    if (!isEncryptionKey(base64Key)) throw new Error('an encryption key must be 32 bytes');
    const key = Buffer.from(base64Key, 'base64');
    const id = createHash('sha256').update(key).digest('hex').slice(0, 8);
    this.#keys.set(id, key);
    this.#lookupKeys.set(id, createHmac('sha256', key).update('webhooks lookup hash v1').digest());
    return id;
  }

  /**
   * Seals a plaintext. `context` (for example the id of the row it belongs to) is authenticated
   * but not stored: the value opens only with the same context, so it cannot be moved to
   * another row.
   */
  seal(plaintext: string, context?: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#keys.get(this.#currentKeyId)!, iv);
    if (context !== undefined) cipher.setAAD(Buffer.from(context, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      CIPHERTEXT_VERSION,
      this.#currentKeyId,
      iv.toString('base64'),
      cipher.getAuthTag().toString('base64'),
      ciphertext.toString('base64'),
    ].join(':');
  }

  /** The id of the current key: the second part of every value it seals (`v1:<key id>:…`). */
  get currentKeyId(): string {
    return this.#currentKeyId;
  }

  /** Whether `sealed` was sealed with another key than the current one (and should be resealed). */
  sealedWithOldKey(sealed: string): boolean {
    return sealed.split(':')[1] !== this.#currentKeyId;
  }

  /** Opens a value made by {@link seal} with the same context; throws if it was tampered with or its key is unknown. */
  open(sealed: string, context?: string): string {
    const [version, keyId, iv, tag, ciphertext] = sealed.split(':');
    if (version !== CIPHERTEXT_VERSION || !keyId || !iv || !tag || ciphertext === undefined) {
      throw new Error('not a sealed secret');
    }
    const key = this.#keys.get(keyId);
    if (!key) throw new Error(`no encryption key with id ${keyId} is configured`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
    if (context !== undefined) decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([
      decipher.update(Buffer.from(ciphertext, 'base64')),
      decipher.final(),
    ]).toString('utf8');
  }

  /**
   * A keyed hash of `value` (HMAC-SHA256 under a key derived from the current encryption key),
   * `<key id>:<hex>`: lets a sealed row be found by a value it holds without storing the value.
   */
  lookupHash(value: string): string {
    return this.#lookupHash(this.#currentKeyId, value);
  }

  /** {@link lookupHash} under every key of the ring, current first: what a row may carry. */
  lookupHashes(value: string): string[] {
    return [...this.#lookupKeys.keys()].map((keyId) => this.#lookupHash(keyId, value));
  }

  #lookupHash(keyId: string, value: string): string {
    return `${keyId}:${createHmac('sha256', this.#lookupKeys.get(keyId)!).update(value, 'utf8').digest('hex')}`;
  }
}
