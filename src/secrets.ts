import {
  createCipheriv,
  createDecipheriv,
  createHash,
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
    const key = Buffer.from(base64Key, 'base64');
    if (key.length !== 32) throw new Error('an encryption key must be 32 bytes');
    const id = createHash('sha256').update(key).digest('hex').slice(0, 8);
    this.#keys.set(id, key);
    return id;
  }

  /** Seals a plaintext secret. */
  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#keys.get(this.#currentKeyId)!, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      CIPHERTEXT_VERSION,
      this.#currentKeyId,
      iv.toString('base64'),
      cipher.getAuthTag().toString('base64'),
      ciphertext.toString('base64'),
    ].join(':');
  }

  /** Whether `sealed` was sealed with another key than the current one (and should be resealed). */
  sealedWithOldKey(sealed: string): boolean {
    return sealed.split(':')[1] !== this.#currentKeyId;
  }

  /** Opens a value made by {@link seal}; throws if it was tampered with or its key is unknown. */
  open(sealed: string): string {
    const [version, keyId, iv, tag, ciphertext] = sealed.split(':');
    if (version !== CIPHERTEXT_VERSION || !keyId || !iv || !tag || ciphertext === undefined) {
      throw new Error('not a sealed secret');
    }
    const key = this.#keys.get(keyId);
    if (!key) throw new Error(`no encryption key with id ${keyId} is configured`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([
      decipher.update(Buffer.from(ciphertext, 'base64')),
      decipher.final(),
    ]).toString('utf8');
  }
}
