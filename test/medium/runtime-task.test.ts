// One-off task containers (Runtime.task, the backups' tools) on the real engine: a task's whole
// output reaches its reader however long the reader takes after the task exited. A 1 GiB backup
// was once cut at what the reader had taken 10 s after pg_dump exited, and called succeeded.
// Uses Docker Engine.
import { Readable, Writable } from 'node:stream';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { ensureDatabaseImages } from '../factories/images.js';
import { localImage } from '../../src/modules/databases/servers.js';

describe('task containers', () => {
  const runtime = new DockerRuntime({ docker: new Docker(), isolationGuard: null });
  const image = localImage('redis');

  beforeAll(async () => {
    await ensureDatabaseImages();
  }, 600_000);
  afterAll(async () => {
    await runtime.purge({ labels: { 'slipway.test': 'runtime-task' } }).catch(() => undefined);
  });

  const run = (command: string[], extra: { stdin?: NodeJS.ReadableStream } = {}) =>
    runtime.task({ name: `slipway-test-task-${String(Date.now())}-${String(Math.random()).slice(2, 8)}`, image, command, owner: { workspace: 'runtime-task' }, labels: { 'slipway.test': 'runtime-task' }, cpu: 1, memoryBytes: 64 * 1024 * 1024, timeoutMs: 60_000, ...extra });

  it("reports the task's own exit code, a quick exit and one that ends before reading its input included", async () => {
    // the engine's wait asked before the start once answered 0 at once, for every task
    expect(await run(['sh', '-c', 'sleep 1; echo bad >&2; exit 3'])).toMatchObject({ exitCode: 3, stderr: 'bad\n', timedOut: false });
    expect(await run(['sh', '-c', 'exit 5'])).toMatchObject({ exitCode: 5, timedOut: false });
    expect(await run(['true'])).toMatchObject({ exitCode: 0, timedOut: false });
    // 32 MiB offered, none of it read: the task's end is not held up by its input
    const input = Readable.from((function* () { for (let i = 0; i < 512; i++) yield Buffer.alloc(64 * 1024, 1); })());
    const started = Date.now();
    expect(await run(['sh', '-c', 'exit 7'], { stdin: input })).toMatchObject({ exitCode: 7, timedOut: false });
    expect(Date.now() - started).toBeLessThan(8_000);
  }, 120_000);

  it('hands a slow reader every byte the task wrote, long after it exited', async () => {
    const size = 24 * 1024 * 1024;
    let got = 0;
    let exitedAt = 0;
    // about 1.5 MiB/s: the reader is still busy well past 10 s after the tool has exited
    const slow = new Writable({
      highWaterMark: 64 * 1024,
      write(chunk: Buffer, _e, done) {
        got += chunk.length;
        setTimeout(done, Math.ceil(chunk.length / (1.5 * 1024 * 1024) * 1000));
      },
    });
    const started = Date.now();
    const r = await runtime.task({
      name: `slipway-test-task-${String(Date.now())}`,
      image,
      command: ['sh', '-c', `head -c ${String(size)} /dev/zero; echo done >&2`],
      owner: { workspace: 'runtime-task' },
      labels: { 'slipway.test': 'runtime-task' },
      cpu: 1,
      memoryBytes: 128 * 1024 * 1024,
      stdout: slow,
      timeoutMs: 120_000,
    });
    exitedAt = Date.now();
    expect(r).toMatchObject({ exitCode: 0, timedOut: false, oomKilled: false });
    expect(r.stderr).toContain('done');
    expect(got).toBe(size);
    expect(slow.writableEnded).toBe(true);
    // it did take the reader that long: this is the case that was cut short
    expect(exitedAt - started).toBeGreaterThan(12_000);
  }, 120_000);
});
