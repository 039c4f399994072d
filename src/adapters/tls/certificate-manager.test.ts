import { describe, expect, it } from 'vitest';
import { renewalDue } from './certificate-manager.js';

const DAY = 86_400_000;
const cert = (issued: string, days: number) => ({ notBefore: new Date(issued), notAfter: new Date(new Date(issued).getTime() + days * DAY) });

describe('renewalDue', () => {
  it('renews a 90-day certificate once less than 30 days are left', () => {
    const c = cert('2026-01-01T00:00:00Z', 90);
    expect(renewalDue(c, new Date(c.notAfter.getTime() - 31 * DAY))).toBe(false);
    expect(renewalDue(c, new Date(c.notAfter.getTime() - 30 * DAY + 1))).toBe(true);
    expect(renewalDue(c, new Date(c.notAfter.getTime() + DAY))).toBe(true);
  });

  it('renews a short-lived certificate in the last third of its life, not at every check', () => {
    const c = cert('2026-01-01T00:00:00Z', 6);
    expect(renewalDue(c, new Date('2026-01-04T23:59:59Z'))).toBe(false);
    expect(renewalDue(c, new Date('2026-01-05T00:00:01Z'))).toBe(true);
  });

  it('takes another window', () => {
    const c = cert('2026-01-01T00:00:00Z', 90);
    expect(renewalDue(c, new Date(c.notAfter.getTime() - 10 * DAY), 7 * DAY)).toBe(false);
    expect(renewalDue(c, new Date(c.notAfter.getTime() - 6 * DAY), 7 * DAY)).toBe(true);
  });
});
