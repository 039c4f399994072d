import { describe, expect, it } from 'vitest';
import { BuildKitLog, decodeStatus } from './buildkit.js';

// A protobuf writer for the test's messages: field → length-delimited bytes or varint.
const varint = (n: number): Buffer => {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Buffer.from(out);
};
const bytes = (field: number, value: Buffer | string): Buffer => {
  const b = Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
  return Buffer.concat([varint(field * 8 + 2), varint(b.length), b]);
};
const flag = (field: number, value: number): Buffer => Buffer.concat([varint(field * 8), varint(value)]);
const timestamp = (field: number) => bytes(field, Buffer.concat([flag(1, 1_700_000_000), flag(2, 5)]));

const vertex = (o: { digest: string; name: string; cached?: boolean; started?: boolean; completed?: boolean; error?: string }) =>
  bytes(1, Buffer.concat([
    bytes(1, o.digest),
    bytes(2, 'sha256:input'),
    bytes(3, o.name),
    ...(o.cached === true ? [flag(4, 1)] : []),
    ...(o.started === true ? [timestamp(5)] : []),
    ...(o.completed === true ? [timestamp(6)] : []),
    ...(o.error === undefined ? [] : [bytes(7, o.error)]),
  ]));
const log = (digest: string, msg: string) => bytes(3, Buffer.concat([bytes(1, digest), timestamp(2), flag(3, 1), bytes(4, msg)]));
const status = (...parts: Buffer[]) => Buffer.concat(parts).toString('base64');

describe('BuildKit status decoding', () => {
  it('reads vertexes and logs of a StatusResponse', () => {
    const s = decodeStatus(status(vertex({ digest: 'd1', name: '[1/2] FROM x', started: true, completed: true, cached: true }), log('d2', 'hello\n')));
    expect(s.vertexes).toEqual([{ digest: 'd1', name: '[1/2] FROM x', cached: true, started: true, completed: true, error: '' }]);
    expect(s.logs.map((l) => [l.vertex, l.msg.toString('utf8')])).toEqual([['d2', 'hello\n']]);
    expect(decodeStatus('')).toEqual({ vertexes: [], logs: [] });
  });

  it('refuses truncated data rather than reading past it', () => {
    const whole = Buffer.from(status(log('d', 'some output\n')), 'base64');
    expect(() => decodeStatus(whole.subarray(0, whole.length - 3).toString('base64'))).toThrow(/truncated/);
  });

  it('writes each Dockerfile step once as "Step n/m : …", then its output line by line, and errors', () => {
    const lines: string[] = [];
    const out = new BuildKitLog((l) => lines.push(l));
    out.write(decodeStatus(status(vertex({ digest: 'i', name: '[internal] load build context', started: true }))));
    out.write(decodeStatus(status(vertex({ digest: 'a', name: '[1/3] FROM base', started: true, completed: true, cached: true }))));
    out.write(decodeStatus(status(vertex({ digest: 'b', name: '[build 2/3] RUN make', started: true }), log('b', 'compil'))));
    out.write(decodeStatus(status(vertex({ digest: 'b', name: '[build 2/3] RUN make', started: true }), log('b', 'ing\nlinking\r\nhalf'))));
    out.write(decodeStatus(status(vertex({ digest: 'b', name: '[build 2/3] RUN make', started: true, completed: true, error: 'process "/bin/sh -c make" did not complete successfully: exit code: 2' }))));
    out.flush();
    expect(lines).toEqual([
      'Step 1/3 : FROM base',
      ' ---> Using cache',
      'Step 2/3 : RUN make',
      'compiling',
      'linking',
      'half',
      'ERROR: process "/bin/sh -c make" did not complete successfully: exit code: 2',
    ]);
  });
});
