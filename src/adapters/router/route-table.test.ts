import { describe, expect, it } from 'vitest';
import { AppError } from '../../domain/errors.js';
import { isRoutableHost, normaliseHost, RouteTable, upstreamKey } from './route-table.js';

const u = (port: number, host = '127.0.0.1') => ({ host, port });

describe('normaliseHost', () => {
  it('lowercases, strips the port and a trailing dot', () => {
    expect(normaliseHost('App.Example.COM')).toBe('app.example.com');
    expect(normaliseHost('app.example.com:8000')).toBe('app.example.com');
    expect(normaliseHost('app.example.com.')).toBe('app.example.com');
    expect(normaliseHost(' app.test:80 ')).toBe('app.test');
    expect(normaliseHost('[::1]:8000')).toBe('[::1]');
    expect(normaliseHost(undefined)).toBeUndefined();
  });

  it('accepts RFC 1123 names only', () => {
    expect(isRoutableHost('app-ws.localhost')).toBe(true);
    expect(isRoutableHost('a.b.c')).toBe(true);
    for (const bad of ['', '-a.test', 'a-.test', 'a..test', 'a_b.test', '10.0.0.1', 'a.test;', 'a test', `${'a'.repeat(64)}.test`]) {
      expect(isRoutableHost(bad), bad).toBe(false);
    }
  });
});

describe('RouteTable', () => {
  it('starts empty at version 0', () => {
    const t = RouteTable.empty();
    expect(t.version).toBe(0);
    expect(t.routes()).toEqual([]);
    expect(t.lookup('a.test')).toBeUndefined();
  });

  it('routes every host of a project to its upstreams, sorted by host', () => {
    const t = RouteTable.empty().setProject('p1', { hosts: ['b.test', 'A.test'], upstreams: [u(1), u(2)] });
    expect(t.routes()).toEqual([
      { host: 'a.test', project: 'p1', upstreams: [u(1), u(2)] },
      { host: 'b.test', project: 'p1', upstreams: [u(1), u(2)] },
    ]);
    expect(t.lookup('B.TEST:8000')).toEqual({ host: 'b.test', project: 'p1', upstreams: [u(1), u(2)] });
    expect(t.project('p1')).toEqual({ hosts: ['a.test', 'b.test'], upstreams: [u(1), u(2)] });
  });

  it('is a value: changes return a new table and leave the old one as it was', () => {
    const t1 = RouteTable.empty().setProject('p1', { hosts: ['a.test'], upstreams: [u(1)] });
    const t2 = t1.setUpstreams('p1', [u(2)]);
    expect(t1.lookup('a.test')?.upstreams).toEqual([u(1)]);
    expect(t2.lookup('a.test')?.upstreams).toEqual([u(2)]);
    expect(t2.version).toBe(t1.version + 1);
    expect(Object.isFrozen(t2.routes())).toBe(true);
  });

  it('assign() moves a host another project holds stale instead of refusing it, and keeps the rest', () => {
    const t = RouteTable.empty()
      .setProject('old', { hosts: ['old.test', 'shop.test'], upstreams: [u(1)] })
      .setProject('new', { hosts: ['new.test'], upstreams: [u(2)] });
    expect(() => t.setProject('new', { hosts: ['new.test', 'shop.test'], upstreams: [u(2)] })).toThrow(AppError);
    const moved = t.assign('new', { hosts: ['new.test', 'Shop.test'], upstreams: [u(2)] });
    expect(moved.lookup('shop.test')).toEqual({ host: 'shop.test', project: 'new', upstreams: [u(2)] });
    expect(moved.project('old')).toEqual({ hosts: ['old.test'], upstreams: [u(1)] });
    // Nothing to move: the same table.
    expect(moved.assign('new', { hosts: ['new.test', 'shop.test'], upstreams: [u(2)] })).toBe(moved);
  });

  it('keeps its version (and identity) when a change changes nothing', () => {
    const t = RouteTable.empty().setProject('p1', { hosts: ['a.test'], upstreams: [u(1)] });
    expect(t.setProject('p1', { hosts: ['A.test'], upstreams: [u(1)] })).toBe(t);
    expect(t.setUpstreams('p1', [u(1), u(1)])).toBe(t);
    expect(t.addHost('p1', 'a.test')).toBe(t);
    expect(t.removeHost('other.test')).toBe(t);
    expect(t.removeProject('nope')).toBe(t);
  });

  it('switches upstreams per project, and a project can have none (stopped)', () => {
    let t = RouteTable.empty().setProject('p1', { hosts: ['a.test'], upstreams: [u(1)] }).setProject('p2', { hosts: ['b.test'], upstreams: [u(5)] });
    t = t.setUpstreams('p1', [u(3), u(4)]);
    expect(t.lookup('a.test')?.upstreams).toEqual([u(3), u(4)]);
    expect(t.lookup('b.test')?.upstreams).toEqual([u(5)]);
    t = t.setUpstreams('p1', []);
    expect(t.lookup('a.test')).toEqual({ host: 'a.test', project: 'p1', upstreams: [] });
  });

  it('keeps upstreams set before any host, and drops duplicates in order', () => {
    const t = RouteTable.empty().setUpstreams('p1', [u(2), u(1), u(2)]).addHost('p1', 'a.test');
    expect(t.lookup('a.test')?.upstreams).toEqual([u(2), u(1)]);
  });

  it('adds and removes single hosts', () => {
    let t = RouteTable.empty().setProject('p1', { hosts: ['a.test'], upstreams: [u(1)] }).addHost('p1', 'custom.example.com');
    expect(t.lookup('custom.example.com')?.project).toBe('p1');
    t = t.removeHost('Custom.Example.com:443');
    expect(t.lookup('custom.example.com')).toBeUndefined();
    expect(t.lookup('a.test')?.project).toBe('p1');
  });

  it('removes a project with all its hosts', () => {
    const t = RouteTable.empty()
      .setProject('p1', { hosts: ['a.test', 'b.test'], upstreams: [u(1)] })
      .setProject('p2', { hosts: ['c.test'], upstreams: [u(2)] })
      .removeProject('p1');
    expect(t.routes().map((r) => r.host)).toEqual(['c.test']);
    expect(t.project('p1')).toBeUndefined();
  });

  it('replaces a project’s hosts as a whole with setProject', () => {
    const t = RouteTable.empty().setProject('p1', { hosts: ['a.test', 'b.test'], upstreams: [u(1)] }).setProject('p1', { hosts: ['c.test'], upstreams: [u(1)] });
    expect(t.routes().map((r) => r.host)).toEqual(['c.test']);
  });

  it('refuses a host another project serves', () => {
    const t = RouteTable.empty().setProject('p1', { hosts: ['a.test'], upstreams: [u(1)] });
    expect(() => t.addHost('p2', 'A.test')).toThrow(AppError);
    expect(() => t.setProject('p2', { hosts: ['a.test'], upstreams: [] })).toThrow(/already routed/);
    // once p1 lets it go, p2 may take it
    expect(t.removeHost('a.test').addHost('p2', 'a.test').lookup('a.test')?.project).toBe('p2');
  });

  it('refuses host names and upstreams that could not be rendered safely', () => {
    const t = RouteTable.empty();
    expect(() => t.addHost('p', 'a.test; evil')).toThrow(/not a valid DNS name/);
    expect(() => t.addHost('p', '127.0.0.1')).toThrow(/not a valid DNS name/);
    expect(() => t.setUpstreams('p', [{ host: '127.0.0.1;', port: 80 }])).toThrow(/not an IP address or a DNS name/);
    expect(() => t.setUpstreams('p', [u(0)])).toThrow(/from 1 to 65535/);
    expect(() => t.setUpstreams('p', [u(1.5)])).toThrow(/integer/);
    expect(() => t.setUpstreams('p', [u(65536)])).toThrow(/65535/);
  });

  it('formats upstreams the way nginx writes them, IPv6 in brackets', () => {
    expect(upstreamKey(u(80))).toBe('127.0.0.1:80');
    expect(upstreamKey(u(80, '::1'))).toBe('[::1]:80');
    expect(RouteTable.empty().setUpstreams('p', [u(80, '::1'), u(81, 'App-1.Internal')]).project('p')?.upstreams).toEqual([u(80, '::1'), u(81, 'app-1.internal')]);
  });

  it('counts versions across a lineage so a driver can tell a change', () => {
    const seen = new Set<number>();
    let t = RouteTable.empty();
    seen.add(t.version);
    for (let i = 0; i < 5; i++) {
      t = t.setUpstreams('p', [u(1000 + i)]);
      seen.add(t.version);
    }
    expect([...seen]).toEqual([0, 1, 2, 3, 4, 5]);
  });
});
