import { describe, expect, it } from 'vitest';
import { redact } from './redact.js';

describe('redact', () => {
  it('removes every given secret value, in its plain, percent-encoded and JSON spellings', () => {
    const secret = 'p@ss w0rd/"x"';
    const text = [`login with p@ss w0rd/"x" failed`, `url=postgres://app:${encodeURIComponent(secret)}@db/app`, `{"pw":"p@ss w0rd/\\"x\\""}`].join('\n');
    const out = redact(text, [secret]);
    expect(out).not.toContain('w0rd');
    expect(out).toBe(['login with [REDACTED] failed', 'url=postgres://app:[REDACTED]@db/app', '{"pw":"[REDACTED]"}'].join('\n'));
  });

  it('replaces a longer secret whole even when a shorter one is inside it', () => {
    expect(redact('key abc123456 and abc', ['abc', 'abc123456'])).toBe('key [REDACTED] and [REDACTED]');
  });

  it('removes values named like passwords, tokens and keys, keeping the names', () => {
    expect(redact('password=hunter2 user=ada')).toBe('password=[REDACTED] user=ada');
    expect(redact('DB_PASSWORD: "correct horse"')).toBe('DB_PASSWORD: [REDACTED]');
    expect(redact('{"api_key":"abc","ok":true}')).toBe('{"api_key":[REDACTED],"ok":true}');
    expect(redact('token: 12345, retry: 3')).toBe('token: [REDACTED], retry: 3');
    expect(redact('X-Api-Key=xyz&page=2')).toBe('X-Api-Key=[REDACTED]&page=2');
    expect(redact('client_secret=s3cr3t')).toBe('client_secret=[REDACTED]');
  });

  it('removes authorization headers and bearer tokens', () => {
    expect(redact('Authorization: Bearer abc.def.ghi')).toBe('Authorization: [REDACTED]');
    expect(redact('sending Bearer 0123456789abcdef to the API')).toBe('sending Bearer [REDACTED] to the API');
    expect(redact('header Basic dXNlcjpwYXNz')).toBe('header Basic [REDACTED]');
  });

  it('removes the password of a URL, keeping the user and host', () => {
    expect(redact('connecting to postgres://app:s3cret@db.internal:5432/app')).toBe('connecting to postgres://app:[REDACTED]@db.internal:5432/app');
    expect(redact('redis://:s3cret@cache:6379')).toBe('redis://:[REDACTED]@cache:6379');
    expect(redact('see https://example.com:8443/path')).toBe('see https://example.com:8443/path');
  });

  it('removes credentials by their shape', () => {
    const shapes = [
      'svc_sk_0123456789abcdef0123456789abcdef01234567',
      'sk-proj-AbCdEfGhIjKlMnOpQrStUv123456',
      'sk_live_51HxYzAbCdEfGhIjKl',
      'ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcd012345',
      'ghs_ABCDEFGHIJKLMNOPQRSTUVWXYZabcd012345',
      'gho_ABCDEFGHIJKLMNOPQRSTUVWXYZabcd012345',
      'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz',
      'xoxb-1234567890-abcdefghijkl',
      'AKIAIOSFODNN7EXAMPLE',
      'AIzaSyA1234567890abcdefghijklmnopqrstuv',
      'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
      '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
      'Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL',
    ];
    for (const shape of shapes) expect(redact(`value ${shape} here`)).toBe('value [REDACTED] here');
    expect(redact('-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----')).toBe('[REDACTED]');
  });

  it('leaves ordinary log text alone', () => {
    const text = [
      'GET /api/users/<*> 200 <*>ms',
      'Missing environment variable DATABASE_URL',
      'at com.example.web.UserController.show(UserController.java:42)',
      '/usr/local/lib/python3.12/site-packages/sqlalchemy/engine/create.py',
      'SOME_VERY_LONG_ENVIRONMENT_VARIABLE_NAME_THAT_IS_FINE',
      'Connection refused to 127.0.0.1:5432',
    ].join('\n');
    expect(redact(text)).toBe(text);
  });
});
