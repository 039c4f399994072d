import { describe, expect, it } from 'vitest';
import { parseLine, splitLines } from './lines.js';
import { maskTokens, mineTemplates } from './templates.js';

describe('maskTokens', () => {
  it('masks numbers, ids, addresses, times, quoted values and paths with digits', () => {
    expect(maskTokens('GET /api/users/42 200 12ms')).toEqual(['GET', '<*>', '<*>', '<*>']);
    expect(maskTokens('container 3f9a1c2b7d4e started at 10:42:07')).toEqual(['container', '<*>', 'started', 'at', '<*>']);
    expect(maskTokens('request 5d3c9f1e-8b2a-4c6d-9e0f-1a2b3c4d5e6f from 10.0.3.17:51234')).toEqual(['request', '<*>', 'from', '<*>']);
    expect(maskTokens('2024-05-01T10:00:00.123Z user "Ada Lovelace" logged in')).toEqual(['<*>', 'user', '<*>', 'logged', 'in']);
    expect(maskTokens('pointer 0xc000123456 (pid=1234)')).toEqual(['pointer', '<*>', '(pid=<*>)']);
  });

  it('keeps words, brackets and numbers that are part of a name', () => {
    expect(maskTokens('sha256 checksum of v2 matched (App.java:5)')).toEqual(['sha256', 'checksum', 'of', 'v2', 'matched', '(App.java:<*>)']);
  });
});

describe('mineTemplates', () => {
  it('merges lines that differ in variable places into one template with wildcards', () => {
    const lines = [
      'Connected to db-primary in 12 ms',
      'Connected to db-replica in 8 ms',
      'worker 3 picked job 981',
      'Connected to cache in 1 ms',
      'worker 4 picked job 982',
    ];
    const templates = mineTemplates(lines);
    expect(templates.map((t) => ({ pattern: t.pattern, count: t.count, example: t.example, lines: t.lines }))).toEqual([
      { pattern: 'Connected to <*> in <*> ms', count: 3, example: 'Connected to db-primary in 12 ms', lines: [0, 1, 3] },
      { pattern: 'worker <*> picked job <*>', count: 2, example: 'worker 3 picked job 981', lines: [2, 4] },
    ]);
  });

  it('keeps lines apart that differ in their leading words or their length', () => {
    const templates = mineTemplates(['Server started', 'Server stopped', 'Server started on port 80']);
    expect(templates.map((t) => t.pattern)).toEqual(['Server started', 'Server stopped', 'Server started on port <*>']);
  });

  it('counts the levels of its lines and reads structured lines by their message', () => {
    const lines = [
      JSON.stringify({ level: 50, time: 1714557600000, msg: 'payment failed for order 17' }),
      'level=error ts=2024-05-01T10:00:00Z msg="payment failed for order 18" trace=ab12',
      '2024-05-01 10:00:02 WARNING payment failed for order 19',
    ];
    const [payment, warning] = mineTemplates(lines);
    expect(payment).toMatchObject({ pattern: 'payment failed for order <*>', count: 2, lines: [0, 1], levels: { error: 2 }, level: 'error' });
    expect(warning).toMatchObject({ pattern: 'WARNING payment failed for order <*>', count: 1, levels: { warn: 1 }, level: 'warn' });
  });

  it('gives the same templates for the same lines', () => {
    const lines = Array.from({ length: 500 }, (_, i) => `job ${String(i % 7)} took ${String(i)} ms on node-${String(i % 3)}`);
    expect(mineTemplates(lines)).toEqual(mineTemplates(lines));
  });

  it('groups 20,000 lines (about 1 MiB) into the templates they were made from', () => {
    const shapes = [
      (i: number) => `2024-05-01T10:${String(i % 60).padStart(2, '0')}:00.${String(i % 1000).padStart(3, '0')}Z INFO GET /api/users/${String(i)} 200 ${String(i % 97)}ms`,
      (i: number) => JSON.stringify({ level: 30, time: 1714557600000 + i, pid: 1, msg: `job ${String(i)} finished in ${String(i % 50)} ms` }),
      (i: number) => `level=error ts=2024-05-01T10:00:00Z msg="payment failed" order=${String(i)} reason="card declined"`,
      (i: number) => `[2024-05-01 10:00:00,123] ERROR in app: Timeout calling inventory after 3000 ms (request ${i.toString(16)}abcdef12)`,
      (i: number) => `Cache hit ratio ${String(i % 100)}% for key user:${String(i)} on shard ${String(i % 8)}`,
    ];
    const lines = Array.from({ length: 20_000 }, (_, i) => (shapes[i % shapes.length] ?? shapes[0])?.(i) ?? '');
    expect(lines.join('\n').length).toBeGreaterThan(1_200_000);
    const templates = mineTemplates(lines);
    expect(templates.map((t) => [t.pattern, t.count, t.level])).toEqual([
      ['INFO GET <*> <*> <*>', 4000, 'info'],
      ['job <*> finished in <*> ms', 4000, 'info'],
      ['payment failed', 4000, 'error'],
      ['ERROR in app: Timeout calling inventory after <*> ms (request <*>)', 4000, 'error'],
      ['Cache hit ratio <*> for key user:<*> on shard <*>', 4000, null],
    ]);
    expect(templates[2]?.lines.slice(0, 3)).toEqual([2, 7, 12]);
  });
});

describe('parseLine', () => {
  it('reads pino, logfmt, bracketed and bare levels, and stack-trace headers as errors', () => {
    expect(parseLine('{"level":60,"msg":"boom"}')).toEqual({ raw: '{"level":60,"msg":"boom"}', text: 'boom', level: 'fatal' });
    expect(parseLine('{"level":"warn","message":"slow query","err":{"message":"timeout"}}').text).toBe('slow query: timeout');
    expect(parseLine('ts=1 level=warn msg="disk almost full"')).toMatchObject({ text: 'disk almost full', level: 'warn' });
    expect(parseLine('[2024-05-01 10:00:00] [error] upstream timed out').level).toBe('error');
    expect(parseLine('ERROR:root:could not send mail').level).toBe('error');
    expect(parseLine('TypeError: x is not a function').level).toBe('error');
    expect(parseLine('panic: boom').level).toBe('fatal');
    expect(parseLine('web-1  | 2024-05-01T10:00:00Z Listening on :3000')).toMatchObject({ text: 'Listening on :3000', level: null });
  });

  it('splits text into lines without a phantom last line', () => {
    expect(splitLines('')).toEqual([]);
    expect(splitLines('a\r\nb\n')).toEqual(['a', 'b']);
  });
});
