import { describe, expect, it } from 'vitest';
import { DEPLOYMENT_STATUSES, isActive, isFinal, next, projectStatusOf, type DeploymentEvent } from './deployment.js';

const ALL = DEPLOYMENT_STATUSES;
const EVENTS: DeploymentEvent['kind'][] = ['claim', 'built', 'healthy', 'fail', 'supersede', 'stop'];

describe('deployment state machine', () => {
  it('allows exactly the transitions of docs/decisions.md#deployments', () => {
    const allowed: string[] = [];
    for (const from of ALL) {
      for (const kind of EVENTS) {
        const to = next(from, { kind });
        if (to !== null) allowed.push(`${from} -${kind}-> ${to}`);
      }
    }
    expect(allowed.sort()).toEqual(
      [
        'queued -claim-> building',
        'building -built-> deploying',
        'deploying -healthy-> running',
        'queued -fail-> failed',
        'building -fail-> failed',
        'deploying -fail-> failed',
        'queued -supersede-> superseded',
        'running -supersede-> superseded',
        'running -stop-> stopped',
      ].sort(),
    );
  });

  it('never leaves a final state', () => {
    for (const from of ALL.filter(isFinal)) {
      for (const kind of EVENTS) expect(next(from, { kind })).toBeNull();
    }
  });

  it('splits states into active, running and final', () => {
    expect(ALL.filter(isActive)).toEqual(['queued', 'building', 'deploying']);
    expect(ALL.filter(isFinal)).toEqual(['failed', 'superseded', 'stopped']);
  });

  it.each([
    [null, false, null, 'pending'],
    ['queued', false, null, 'building'],
    ['building', true, null, 'building'],
    ['deploying', true, null, 'deploying'],
    [null, true, 'failed', 'running'],
    [null, false, 'failed', 'failed'],
    [null, false, 'stopped', 'stopped'],
  ] as const)('project status for active %s, serving %s, last %s is %s', (active, serving, last, status) => {
    expect(projectStatusOf(active, serving, last)).toBe(status);
  });
});
