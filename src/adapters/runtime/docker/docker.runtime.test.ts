import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Docker from 'dockerode';
import { afterEach, describe, expect, it } from 'vitest';
import { DockerRuntime } from './docker.runtime.js';
import { compareApiVersions, engineDate, engineMessage, stripAnsi } from './engine.js';
import { Channel, LineSplitter } from './feed.js';
import { isEmptySelector, labelFilter, ownerOf } from './labels.js';
import { cpuMillicores, memoryUsed } from './usage.js';

describe('the engine check', () => {
  let server: Server | undefined;
  afterEach(async () => {
    const s = server;
    server = undefined;
    if (s !== undefined) await new Promise((resolve) => s.close(resolve));
  });

  /** An engine that answers /version with the given API version. */
  async function fakeEngine(apiVersion: string): Promise<Docker> {
    server = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url?.endsWith('/version') === true) {
        res.end(JSON.stringify({ Version: '19.03.15', ApiVersion: apiVersion, MinAPIVersion: '1.12', Os: 'linux', Arch: 'amd64' }));
      } else {
        res.statusCode = 404;
        res.end('{"message":"page not found"}');
      }
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return new Docker({ host: '127.0.0.1', port, protocol: 'http' });
  }

  it('refuses an engine older than API 1.41, naming both versions', async () => {
    const runtime = new DockerRuntime({ docker: await fakeEngine('1.40') });
    await expect(runtime.check()).rejects.toThrow(/API 1\.40.*needs API 1\.41 or newer/);
  });

  it('accepts API 1.41 and newer', async () => {
    const runtime = new DockerRuntime({ docker: await fakeEngine('1.51') });
    await expect(runtime.check()).resolves.toMatchObject({ apiVersion: '1.51', version: '19.03.15', os: 'linux' });
  });

  it('says where it looked when no engine answers', async () => {
    const runtime = new DockerRuntime({ docker: new Docker({ socketPath: '/nonexistent/docker.sock' }) });
    await expect(runtime.check()).rejects.toThrow(/does not answer at \/nonexistent\/docker\.sock.*DOCKER_HOST/);
  });
});

describe('docker helpers', () => {
  it('compares API versions numerically', () => {
    expect(compareApiVersions('1.41', '1.41')).toBe(0);
    expect(compareApiVersions('1.9', '1.41')).toBeLessThan(0);
    expect(compareApiVersions('1.100', '1.41')).toBeGreaterThan(0);
    expect(compareApiVersions('2', '1.41')).toBeGreaterThan(0);
  });

  it("extracts the engine's own sentence from docker-modem errors", () => {
    expect(engineMessage(Object.assign(new Error('(HTTP code 500) server error - Cannot locate specified Dockerfile: x '), { statusCode: 500, json: null })))
      .toBe('Cannot locate specified Dockerfile: x');
    expect(engineMessage({ statusCode: 404, json: { message: 'No such image: a:b' }, message: '(HTTP code 404) no such image - No such image: a:b ' }))
      .toBe('No such image: a:b');
    expect(engineMessage(new Error('connect ENOENT /var/run/docker.sock'))).toBe('connect ENOENT /var/run/docker.sock');
  });

  it('strips colour codes and reads the zero time as never', () => {
    expect(stripAnsi('\u001b[91mto-stderr\n\u001b[0m')).toBe('to-stderr\n');
    expect(engineDate('0001-01-01T00:00:00Z')).toBeNull();
    expect(engineDate('2026-11-21T23:47:39.386526513Z')?.toISOString()).toBe('2026-11-21T23:47:39.386Z');
  });

  it('splits chunks into lines, across chunk and multi-byte boundaries', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    const euro = Buffer.from('€');
    s.write('Step 1/2 : FROM x');
    s.write('\n ---> abc\r\npart');
    s.write(Buffer.concat([Buffer.from('ial '), euro.subarray(0, 1)]));
    s.write(Buffer.concat([euro.subarray(1), Buffer.from('\nlast')]));
    s.flush();
    expect(lines).toEqual(['Step 1/2 : FROM x', ' ---> abc', 'partial €', 'last']);
  });

  it('delivers pushed items in order, ends, fails once, and stops on close', async () => {
    const ch = new Channel<number>();
    ch.push(1);
    const it = ch[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ value: 1, done: false });
    const pending = it.next();
    ch.push(2);
    expect(await pending).toEqual({ value: 2, done: false });
    ch.end(new Error('engine went away'));
    await expect(it.next()).rejects.toThrow('engine went away');
    expect(await it.next()).toEqual({ value: undefined, done: true });

    let closed = 0;
    const stoppable = new Channel<number>(() => { closed++; });
    const reading = (async () => {
      const seen: number[] = [];
      for await (const n of stoppable) seen.push(n);
      return seen;
    })();
    stoppable.push(7);
    await Promise.resolve();
    stoppable.close();
    stoppable.close();
    expect(await reading).toEqual([7]);
    expect(closed).toBe(1);
  });

  it('turns selectors into label filters that always include managed-by', () => {
    expect(labelFilter({ owner: { project: 'p1' }, labels: { a: 'b' } }).sort()).toEqual(['a=b', 'slipway.managed-by=slipway', 'slipway.project=p1']);
    expect(isEmptySelector({})).toBe(true);
    expect(isEmptySelector({ owner: {}, labels: {} })).toBe(true);
    expect(isEmptySelector({ owner: { workspace: 'w' } })).toBe(false);
    expect(ownerOf({ 'slipway.workspace': 'w', 'slipway.project': 'p', 'slipway.deployment': 'd' })).toEqual({ workspace: 'w', project: 'p', deployment: 'd' });
    expect(ownerOf({ 'slipway.workspace': 'w' })).toBeNull();
  });

  it('computes cpu millicores and memory the way `docker stats` does', () => {
    // half of one of two CPUs: 0.5 s of container time over 2 s of host time (two CPUs for 1 s)
    expect(cpuMillicores({ total: 1e9, system: 10e9, read: '' }, { total: 1.5e9, system: 12e9, read: '', cpus: 2 })).toBe(500);
    // no system time reported: by wall time
    expect(cpuMillicores(
      { total: 0, system: undefined, read: '2026-01-01T00:00:00.000Z' },
      { total: 250e6, system: undefined, read: '2026-01-01T00:00:01.000Z', cpus: 2 },
    )).toBe(250);
    expect(memoryUsed({ usage: 10_000, stats: { total_inactive_file: 4_000 } })).toBe(6_000);
    expect(memoryUsed({ usage: 10_000, stats: { inactive_file: 1_000 } })).toBe(9_000);
    expect(memoryUsed({ usage: 10_000 })).toBe(10_000);
  });
});
