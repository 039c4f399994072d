import { describe, expect, it } from 'vitest';
import { bridgeName, GUARD_COMMENT, GUARD_RULES, guardIsolation, type GuardHost } from './isolation-guard.js';

/** A host whose firewall holds `present` (rules as joined argument strings) and records each call. */
function host(over: Partial<GuardHost> = {}, present = new Set<string>(), refuse?: RegExp): GuardHost & { calls: string[] } {
  const calls: string[] = [];
  return {
    dockerHost: undefined,
    uid: 0,
    calls,
    iptables: (args) => {
      const line = args.join(' ');
      calls.push(line);
      const rule = args.slice(4).join(' ');
      if (refuse?.test(line) === true) return Promise.reject(new Error('iptables: Permission denied (you must be root).'));
      if (args[3] === '-C') return present.has(rule) ? Promise.resolve() : Promise.reject(new Error('Bad rule'));
      if (args[3] === '-I') present.add(rule);
      return Promise.resolve();
    },
    ...over,
  };
}

describe('the network isolation guard', () => {
  it('adds its DROP rules to the mangle table once, checking each first, so a restart or a second installation adds none twice', async () => {
    const firewall = new Set<string>();
    const first = host({}, firewall);
    expect(await guardIsolation(first)).toEqual({ on: true, rules: GUARD_RULES.length });
    const inserts = first.calls.filter((c) => c.includes(' -I '));
    expect(inserts).toHaveLength(GUARD_RULES.length);
    for (const line of inserts) {
      expect(line).toMatch(/^-w -t mangle -I FORWARD /);
      expect(line).toContain(`--comment ${GUARD_COMMENT} -j DROP`);
    }
    // routed traffic between two Slipway bridges, but not what is bridged inside one network
    expect(inserts[0]).toContain('-i slw-+ -o slw-+ -m physdev ! --physdev-is-bridged');
    expect(inserts.some((l) => l.includes('-i slw-+ -o br-+')) && inserts.some((l) => l.includes('-i br-+ -o slw-+'))).toBe(true);
    const again = host({}, firewall);
    expect(await guardIsolation(again)).toEqual({ on: true, rules: GUARD_RULES.length });
    expect(again.calls.filter((c) => c.includes(' -I '))).toEqual([]);
  });

  it('adds each rule once when two runtimes of a process check at the same moment', async () => {
    const firewall = new Set<string>();
    const slow = host({}, firewall);
    const inner = (args: readonly string[]) => host({}, firewall).iptables(args);
    // each call waits a turn of the event loop, as a child process would
    slow.iptables = async (args) => {
      slow.calls.push(args.join(' '));
      await new Promise((r) => setImmediate(r));
      return inner(args);
    };
    await Promise.all([guardIsolation(slow), guardIsolation(slow)]);
    expect(slow.calls.filter((c) => c.includes(' -I '))).toHaveLength(GUARD_RULES.length);
  });

  it('says why it is off: a remote engine, a user other than root, or iptables refusing', async () => {
    const remote = host({ dockerHost: 'tcp://10.0.0.5:2376' });
    expect(await guardIsolation(remote)).toEqual({ on: false, why: expect.stringMatching(/not on this machine \(DOCKER_HOST=tcp:\/\/10\.0\.0\.5:2376\)/) as unknown });
    expect(remote.calls).toEqual([]);
    expect(await guardIsolation(host({ dockerHost: 'unix:///run/docker.sock' }))).toMatchObject({ on: true });
    expect(await guardIsolation(host({ uid: 1000 }))).toEqual({ on: false, why: expect.stringMatching(/user 1000, not root/) as unknown });
    expect(await guardIsolation(host({}, new Set(), / -I /))).toEqual({ on: false, why: expect.stringMatching(/iptables refused .*Permission denied/) as unknown });
  });

  it('names a bridge by its subnet within the kernel\'s 15 characters, or at random without one', () => {
    expect(bridgeName('10.213.4.0/24', () => 'x')).toBe('slw-0ad5040018');
    expect(bridgeName('10.213.4.64/26', () => 'x')).toBe('slw-0ad504401a');
    expect(bridgeName('10.213.4.0/24', () => 'x')).not.toBe(bridgeName('10.213.5.0/24', () => 'x'));
    expect(bridgeName(null, () => 'abcdef0123456789')).toBe('slw-abcdef01234');
    for (const n of [bridgeName('255.255.255.0/24', () => ''), bridgeName(null, () => 'f'.repeat(40))]) expect(n.length).toBeLessThanOrEqual(15);
  });
});
