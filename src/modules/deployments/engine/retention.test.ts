import { describe, expect, it } from 'vitest';
import type { ManagedNetwork, Runtime } from '../../../domain/runtime.js';
import { NETWORK_GRACE_MS, Retention } from './retention.js';

const NOW = new Date('2026-12-07T12:00:00Z');

/** A retention over `networks` (the engine's) and the workspaces that exist; what it removed. */
function retention(networks: ManagedNetwork[], workspaces: string[]) {
  const removed: string[] = [];
  const runtime = {
    listNetworks: () => Promise.resolve(networks),
    removeNetwork: (id: string) => {
      removed.push(id);
      return Promise.resolve(true);
    },
  } as unknown as Runtime;
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const r = new Retention({
    repos: { workspaces: { ids: () => Promise.resolve(new Set(workspaces)) } } as never,
    runtime,
    clock: { now: () => NOW },
    log: quiet,
    labels: { 'slipway.instance': 'i1' },
    keep: 5,
    everyMs: 1000,
    forgetNetwork: () => undefined,
    currentNetwork: (name) => !name.startsWith('ws-'),
  });
  return { r, removed };
}

const net = (id: string, workspace: string, name: string, ageMs: number | null): ManagedNetwork => ({
  id,
  name,
  workspace,
  subnet: null,
  labels: {},
  created: ageMs === null ? null : new Date(NOW.getTime() - ageMs),
});

describe('the network sweep', () => {
  it('removes the networks of deleted workspaces and older-named ones, but none made in the last few seconds (its first container may be about to start)', async () => {
    const { r, removed } = retention(
      [
        net('deleted-old', 'w-gone', 'slipway-x-ws-gone', 60_000),
        net('deleted-new', 'w-new', 'slipway-x-ws-new', 1_000),
        net('legacy-old', 'w-live', 'ws-live', NETWORK_GRACE_MS + 1_000),
        net('legacy-new', 'w-live', 'ws-live2', 100),
        net('current', 'w-live', 'slipway-x-ws-live', 60_000),
        net('undated', 'w-gone', 'slipway-x-ws-gone2', null),
      ],
      ['w-live'],
    );
    await r.sweepNetworks();
    expect(removed.sort()).toEqual(['deleted-old', 'legacy-old', 'undated']);
  });
});
