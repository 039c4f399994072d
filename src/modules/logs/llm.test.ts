import { describe, expect, it } from 'vitest';
import { inspect } from './analyzer.js';
import { buildPayload, parseAnswer } from './llm.js';

describe('parseAnswer', () => {
  const issue = { pattern: 'p', count: 2, severity: 'warning', example: '', hint: 'h' };

  it('takes the known fields only, from plain or fenced JSON', () => {
    const content = JSON.stringify({ summary: 's', issues: [{ ...issue, extra: 'dropped' }], confidence: 0.9 });
    expect(parseAnswer(content)).toEqual({ summary: 's', issues: [issue] });
    expect(parseAnswer(`\`\`\`json\n${content}\n\`\`\``)).toEqual({ summary: 's', issues: [issue] });
  });

  it('refuses anything off the shape', () => {
    const bad = [
      'null',
      '[]',
      JSON.stringify({ summary: 's', issues: {} }),
      JSON.stringify({ summary: 's'.repeat(2001), issues: [] }),
      JSON.stringify({ summary: 's', issues: Array.from({ length: 51 }, () => issue) }),
      JSON.stringify({ summary: 's', issues: [{ ...issue, count: -1 }] }),
      JSON.stringify({ summary: 's', issues: [{ ...issue, count: '2' }] }),
      JSON.stringify({ summary: 's', issues: [{ ...issue, hint: ' ' }] }),
      JSON.stringify({ summary: 's', issues: [{ ...issue, severity: 'info' }] }),
    ];
    for (const content of bad) expect(() => parseAnswer(content), content.slice(0, 60)).toThrow();
  });
});

describe('buildPayload', () => {
  it('sends error templates first, redacted, and maps patterns back to real lines', () => {
    const logs = [
      'GET / 200',
      'GET / 200',
      'GET / 200',
      'ERROR token rejected for tenant acme: hunter2-secret',
      'ERROR token rejected for tenant zeta: hunter2-secret',
    ];
    const { payload, examples } = buildPayload(inspect(logs), ['hunter2-secret']);
    expect(payload.templates).toEqual([
      { pattern: 'ERROR token rejected for tenant <*> [REDACTED]', count: 2, level: 'error' },
      { pattern: 'GET / <*>', count: 3, level: null },
    ]);
    expect(examples.get('ERROR token rejected for tenant <*> [REDACTED]')).toBe('ERROR token rejected for tenant acme: hunter2-secret');
    expect(JSON.stringify(payload)).not.toContain('hunter2');
  });

  it('keeps the templates within a budget however many distinct lines there are', () => {
    const logs = Array.from({ length: 5000 }, (_, i) => `${'word'.repeat(1 + (i % 50))} ${String.fromCharCode(97 + (i % 26))}${'z'.repeat(i % 7)} unique-${i.toString(36).replace(/\d/g, 'q')}`);
    const { payload } = buildPayload(inspect(logs), []);
    expect(payload.templates.length).toBeLessThanOrEqual(200);
    expect(JSON.stringify(payload.templates).length).toBeLessThan(70_000);
  });
});
