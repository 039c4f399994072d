import { createCipheriv, createDecipheriv, createHmac, hkdfSync } from 'node:crypto';
import type { Random } from '../../domain/clock.js';

const VERSION = 'v1';

/**
 * Seals secret values at rest with AES-256-GCM. The sealed form is text:
 * `v1:<iv>:<tag>:<ciphertext>` (base64). The context (for example `env:<project>:<KEY>`) is
 * authenticated but not stored, so a sealed value copied into another row does not open.
 */
export class SecretBox {
  constructor(
    private readonly key: Buffer,
    private readonly random: Random,
  ) {
    if (key.length !== 32) throw new Error('the secret key must be 32 bytes');
  }

  seal(plaintext: string, context: string): string {
    const iv = this.random.bytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join(':');
  }

  /**
   * HMAC-SHA256 of `data` under a key derived (HKDF-SHA256) from the secret key for `purpose`:
   * signatures made for one purpose are worthless for another, and the key itself never leaves.
   */
  mac(purpose: string, data: string): Buffer {
    const key = Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `slipway mac: ${purpose}`, 32));
    return createHmac('sha256', key).update(data, 'utf8').digest();
  }

  /**
   * A key of its own for `purpose` (HKDF-SHA256 of the secret key), e.g. one per backup
   * artifact: what it seals opens with no other purpose's key, and the secret key never leaves.
   */
  derive(purpose: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `slipway key: ${purpose}`, 32));
  }

  /** The plaintext, or null when the value was sealed with another key or context, or was altered. */
  tryOpen(sealed: string, context: string): string | null {
    try {
      return this.open(sealed, context);
    } catch {
      return null;
    }
  }

  /** Throws when the value was sealed with another key or context, or was altered. */
  open(sealed: string, context: string): string {
    const [version, iv, tag, body] = sealed.split(':');
    if (version !== VERSION || iv === undefined || tag === undefined || body === undefined) {
      throw new Error('not a sealed value');
    }
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
  }
}
