import { describe, expect, it } from 'vitest';
import { scrubEnv } from './scrub.js';

describe('scrubEnv', () => {
  // runc's own sentence, as the engine relays it (Docker Engine 20.10)
  const runc = (quoted: string) =>
    `failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: environment variable value can't contain null(\\x00): "${quoted}": unknown`;

  it("removes a value runc quotes with Go's escapes, and what follows its KEY=", () => {
    const env = { TOKEN: 'hunter2-sekrit\0tail-part', PORT: '8080' };
    const out = scrubEnv(runc('TOKEN=hunter2-sekrit\\x00tail-part'), env);
    expect(out).toBe(runc('TOKEN=[redacted]'));
    expect(out).not.toMatch(/hunter2|sekrit|tail-part/);
  });

  it('removes values wherever they appear, raw, JSON- or Go-escaped, the longest first', () => {
    const env = { A: 'abcd"efgh', B: 'abcd', C: 'line1\nline2' };
    expect(scrubEnv('x abcd"efgh y abcd\\"efgh z abcd w line1\\nline2 v line1', env)).toBe(
      'x [redacted] y [redacted] z [redacted] w [redacted] v [redacted]',
    );
  });

  it('leaves short values alone except after their KEY=, and changes nothing else', () => {
    expect(scrubEnv('port 80 is taken; "X=80"', { X: '80' })).toBe('port 80 is taken; "X=[redacted]"');
    expect(scrubEnv('no such image', { SECRET: 'value-not-here' })).toBe('no such image');
    // a key inside another name is not that key
    expect(scrubEnv('MY_X=abc', { X: 'zz' })).toBe('MY_X=abc');
  });
});
