import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Random } from '../../domain/clock.js';

/**
 * The 32-byte key that encrypts secret values at rest, kept as 64 hex characters in a file
 * only its owner can read. Generated on first start; losing it makes stored secrets unreadable.
 */
export function loadOrCreateSecretKey(file: string, random: Random): Buffer {
  if (existsSync(file)) {
    const text = readFileSync(file, 'utf8').trim();
    if (!/^[0-9a-f]{64}$/i.test(text)) throw new Error(`The secret key file ${file} must hold 64 hex characters (32 bytes).`);
    return Buffer.from(text, 'hex');
  }
  mkdirSync(dirname(file), { recursive: true });
  const key = random.bytes(32);
  writeFileSync(file, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return key;
}
