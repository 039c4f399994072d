import { describe, expect, it } from 'vitest';
import { canonical, formatAge, formatBytes, formatMillicores, millicores, ramBytes } from './resources.js';

describe('project resources', () => {
  it.each([
    ['0.5', 500, '500m'],
    ['2', 2000, '2000m'],
    ['0.125', 125, '125m'],
  ])('cpu %s is %i millicores', (cpu, m, text) => {
    expect(millicores(cpu)).toBe(m);
    expect(formatMillicores(m)).toBe(text);
  });

  it.each([
    ['0.5', '512Mi'],
    ['0.125', '128Mi'],
    ['1', '1Gi'],
    ['1.5', '1536Mi'],
  ])('ram %s GiB is %s', (ram, text) => {
    expect(formatBytes(ramBytes(ram))).toBe(text);
  });

  it('formats small memory use', () => {
    expect(formatBytes(0)).toBe('0Mi');
    expect(formatBytes(35_000_000)).toBe('33Mi');
    expect(formatBytes(2048)).toBe('0Mi');
  });

  it('canonicalises decimal strings', () => {
    expect(canonical('0.50')).toBe('0.5');
    expect(canonical('1.0')).toBe('1');
  });

  it.each([
    [45_000, '45s'],
    [12 * 60_000, '12m'],
    [3 * 3_600_000 + 5, '3h'],
    [2 * 86_400_000, '2d'],
    [-5, '0s'],
  ])('age of %i ms is %s', (ms, text) => {
    expect(formatAge(ms)).toBe(text);
  });
});
