import { describe, expect, it } from 'vitest';
import { cutLine, decodePosition, encodePosition, levelOf, ResumePoint, sinceOf, stampKey } from './collector.js';

describe('cutLine', () => {
  it('keeps a line up to the limit as it is', () => {
    expect(cutLine('a'.repeat(100), 100)).toBe('a'.repeat(100));
    expect(cutLine('short', 16384)).toBe('short');
  });

  it('cuts a longer line to the limit and says how long it was', () => {
    const mark = ' … [cut: 20480 bytes]';
    const cut = cutLine('a'.repeat(20_480), 16_384);
    expect(cut).toBe(`${'a'.repeat(16_384 - Buffer.byteLength(mark))}${mark}`);
    expect(Buffer.byteLength(cut)).toBe(16_384);
  });

  it('never cuts inside a character', () => {
    // 'é' is two bytes: a cut at an odd byte falls back to the character's start
    // the mark takes 20 bytes of the 25: five are left, and the third 'é' would need a sixth
    const cut = cutLine('é'.repeat(20), 25);
    expect(cut).toBe('éé … [cut: 40 bytes]');
  });
});

describe('levelOf', () => {
  it('reads JSON levels by name and pino number', () => {
    expect(levelOf('{"level":"error","msg":"boom"}')).toBe('error');
    expect(levelOf('{"severity":"WARNING","message":"x"}')).toBe('warn');
    expect(levelOf('{"lvl":"debug"}')).toBe('debug');
    expect(levelOf('{"level":30,"msg":"listening"}')).toBe('info');
    expect(levelOf('{"level":60}')).toBe('fatal');
  });

  it('reads logfmt', () => {
    expect(levelOf('time=2024-01-01T00:00:00Z level=warn msg="disk almost full"')).toBe('warn');
    expect(levelOf('level="info" msg=ok')).toBe('info');
  });

  it('is null where the line names none', () => {
    expect(levelOf('plain text ERROR here')).toBeNull();
    expect(levelOf('{"msg":"no level"}')).toBeNull();
    expect(levelOf('{not json level=error')).toBe('error');
    expect(levelOf('{"level":"loud"}')).toBeNull();
  });
});

describe('stampKey', () => {
  it('sorts engine time stamps of any precision as text', () => {
    const stamps = ['2026-01-01T00:00:00.5Z', '2026-01-01T00:00:00.123456789Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00.123457Z'];
    expect([...stamps].sort((a, b) => (stampKey(a) < stampKey(b) ? -1 : 1))).toEqual([
      '2026-01-01T00:00:00Z',
      '2026-01-01T00:00:00.123456789Z',
      '2026-01-01T00:00:00.123457Z',
      '2026-01-01T00:00:00.5Z',
    ]);
  });
});

describe('ResumePoint', () => {
  const t = (n: number) => `2026-01-01T00:00:00.00000000${n.toString()}Z`;

  it('takes everything without a cursor', () => {
    const r = new ResumePoint(null);
    expect([t(1), t(1), t(2)].map((s) => r.seen(s))).toEqual([false, false, false]);
  });

  it('skips lines before the cursor and as many at its time stamp as are stored', () => {
    const r = new ResumePoint({ timestamp: t(2), count: 2 });
    expect([t(1), t(2), t(2), t(2), t(3)].map((s) => r.seen(s))).toEqual([true, true, true, false, false]);
  });

  it('takes a later line even when fewer lines share the cursor time stamp than it counted', () => {
    const r = new ResumePoint({ timestamp: t(2), count: 3 });
    expect([t(2), t(3), t(3)].map((s) => r.seen(s))).toEqual([true, false, false]);
  });

  it('once past the cursor, takes every line, even one with an equal time stamp', () => {
    const r = new ResumePoint({ timestamp: t(2), count: 1 });
    expect([t(2), t(2), t(2)].map((s) => r.seen(s))).toEqual([true, false, false]);
  });
});

describe('cursor positions', () => {
  const out = { timestamp: '2026-01-01T00:00:02.000000001Z', count: 2 };
  const err = { timestamp: '2026-01-01T00:00:01.5Z', count: 1 };

  it('keeps each stream apart through the store', () => {
    expect(decodePosition(encodePosition({ stdout: out, stderr: err }))).toEqual({ stdout: out, stderr: err });
    expect(decodePosition(encodePosition({ stdout: out, stderr: null }))).toEqual({ stdout: out, stderr: null });
  });

  it('asks the engine from before the earlier stream, by more than the streams lie apart', () => {
    expect(sinceOf({ stdout: out, stderr: err })?.toISOString()).toBe('2026-01-01T00:00:00.500Z');
    expect(sinceOf({ stdout: null, stderr: null })).toBeUndefined();
  });

  it('reads a bare time stamp as both streams', () => {
    expect(decodePosition({ timestamp: out.timestamp, atTimestamp: 2 })).toEqual({ stdout: out, stderr: out });
  });
});
