import { execFile } from 'node:child_process';
import { parseCidr } from './network-pool.js';

/**
 * Cross-network isolation that the engine cannot lift (docs/security.md#network-isolation).
 *
 * Docker keeps bridge networks apart with its `DOCKER-ISOLATION-STAGE-*` chains, jumped from the
 * filter table's FORWARD chain. Docker Engine 20.10 (and its libnetwork's `EnsureJumpRule` since)
 * deletes that jump and inserts it again each time any network is created, one iptables process
 * after the other: in between, every bridge forwards to every other. Under a tenant who creates
 * workspaces in a loop, a container on one network reached a server on another in 17 of 56 tries
 * here. So Slipway names its bridges `slw-…` and keeps rules of its own in the mangle table,
 * which Docker does not touch: a routed packet (not one bridged inside a network) from one Slipway
 * bridge to another, or between a Slipway bridge and any other Docker bridge, is dropped. Each
 * rule is added once, at the first network this process creates, and never removed.
 */

/** What every Slipway workspace bridge is named with (`com.docker.network.bridge.name`). */
export const BRIDGE_PREFIX = 'slw-';
/** the rules' comment: how an operator finds them (`iptables -t mangle -S FORWARD`) */
export const GUARD_COMMENT = 'slipway: keep workspace networks apart (docs/security.md#network-isolation)';

const SLW = `${BRIDGE_PREFIX}+`;
/** The mangle table's FORWARD rules, each a DROP. */
export const GUARD_RULES: readonly (readonly string[])[] = [
  // between two Slipway bridges, unless bridged inside one network
  ['-i', SLW, '-o', SLW, '-m', 'physdev', '!', '--physdev-is-bridged'],
  // between a Slipway bridge and any other of the engine's bridges, either way
  ['-i', SLW, '-o', 'br-+'],
  ['-i', 'br-+', '-o', SLW],
  ['-i', SLW, '-o', 'docker0'],
  ['-i', 'docker0', '-o', SLW],
];

export type IsolationGuard =
  | { on: true; rules: number }
  /** why not: said at start-up, where the operator looks */
  | { on: false; why: string };

export interface GuardHost {
  /** DOCKER_HOST as Slipway sees it */
  dockerHost: string | undefined;
  /** the process's user id (process.getuid) */
  uid: number | undefined;
  /** runs iptables with these arguments; rejects with its message when it exits non-zero */
  iptables(args: readonly string[]): Promise<void>;
}

/** Runs `iptables` (the one on PATH, as Docker does), bounded in time. */
export function hostIptables(args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('iptables', [...args], { timeout: 30_000 }, (err, _stdout, stderr) => {
      if (err === null) resolve();
      else reject(new Error(`iptables ${args.join(' ')}: ${(stderr || err.message).trim()}`, { cause: err }));
    });
  });
}

export const thisHost = (): GuardHost => ({ dockerHost: process.env['DOCKER_HOST'], uid: process.getuid?.(), iptables: hostIptables });

/** Whether the engine is this machine's (a Unix socket): only then are its bridges this kernel's. */
const engineIsLocal = (dockerHost: string | undefined): boolean => dockerHost === undefined || dockerHost === '' || dockerHost.startsWith('unix://');

/**
 * Adds the guard's rules that are missing (each checked with `-C` first, so a restart or a second
 * installation on the engine adds none again; two processes starting at the same instant may each
 * add one, a harmless duplicate DROP). Never throws: what it could not do comes back as
 * `why`, and the engine's own isolation is then all there is.
 */
export function guardIsolation(host: GuardHost): Promise<IsolationGuard> {
  // one at a time in a process: two runtimes checking at once would both add every rule
  const run = turns.then(() => addRules(host));
  turns = run.catch(() => undefined);
  return run;
}

let turns: Promise<unknown> = Promise.resolve();

async function addRules(host: GuardHost): Promise<IsolationGuard> {
  if (!engineIsLocal(host.dockerHost)) {
    return { on: false, why: `the Docker Engine is not on this machine (DOCKER_HOST=${host.dockerHost ?? ''}), so Slipway cannot add its isolation rules to the engine host's firewall` };
  }
  if (host.uid !== undefined && host.uid !== 0) {
    return { on: false, why: `Slipway runs as user ${host.uid.toString()}, not root, so it cannot add its isolation rules to this machine's firewall (iptables)` };
  }
  try {
    for (const rule of GUARD_RULES) {
      const spec = ['FORWARD', ...rule, '-m', 'comment', '--comment', GUARD_COMMENT, '-j', 'DROP'];
      const present = await host.iptables(['-w', '-t', 'mangle', '-C', ...spec]).then(() => true, () => false);
      if (!present) await host.iptables(['-w', '-t', 'mangle', '-I', ...spec]);
    }
  } catch (err) {
    return { on: false, why: `iptables refused Slipway's isolation rules: ${err instanceof Error ? err.message : String(err)}` };
  }
  return { on: true, rules: GUARD_RULES.length };
}

/**
 * The bridge name of a network on `subnet` (`slw-` and the subnet's address and size in hex,
 * 15 characters, the kernel's limit): unique while the engine refuses overlapping subnets. Without
 * a subnet (the engine's own pools), `fallback` (random hex) makes it.
 */
export function bridgeName(subnet: string | null, fallback: () => string): string {
  const block = subnet === null ? null : parseCidr(subnet);
  if (block === null) return `${BRIDGE_PREFIX}${fallback().slice(0, 11)}`;
  return `${BRIDGE_PREFIX}${block.start.toString(16).padStart(8, '0')}${block.prefix.toString(16).padStart(2, '0')}`;
}
