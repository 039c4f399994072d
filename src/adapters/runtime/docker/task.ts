import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type Docker from 'dockerode';
import type { TaskResult, TaskSpec } from '../../../domain/runtime.js';
import { engineMessage } from './engine.js';
import { withOwner } from './labels.js';

/** How much of a task's standard error is kept for its result. */
const STDERR_TAIL = 8 * 1024;

/**
 * The engine's multiplexed stream of a container without a TTY (8-byte frame headers: the
 * stream, then the payload's length, big-endian) split into standard output, written to
 * `stdout` with its backpressure, and the tail of standard error. A frame may span chunks.
 */
export class Demux extends Writable {
  private header = Buffer.alloc(0);
  private remaining = 0;
  private kind = 0;
  private tail = '';

  constructor(private readonly stdout: NodeJS.WritableStream | undefined) {
    super();
  }

  get stderr(): string {
    return this.tail;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    const parts: Buffer[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining === 0) {
        const need = 8 - this.header.length;
        this.header = Buffer.concat([this.header, chunk.subarray(at, at + need)]);
        at += Math.min(need, chunk.length - at);
        if (this.header.length < 8) break;
        this.kind = this.header[0] ?? 0;
        this.remaining = this.header.readUInt32BE(4);
        this.header = Buffer.alloc(0);
        continue;
      }
      const take = Math.min(this.remaining, chunk.length - at);
      const payload = chunk.subarray(at, at + take);
      at += take;
      this.remaining -= take;
      if (this.kind === 1) parts.push(payload);
      else if (this.kind === 2) this.tail = (this.tail + payload.toString('utf8')).slice(-STDERR_TAIL);
    }
    // a reader that went away (the backup failed while storing): the rest is dropped, and the task is killed by its owner
    if (parts.length === 0 || this.stdout === undefined || (this.stdout as { destroyed?: boolean }).destroyed === true) {
      done();
      return;
    }
    const data = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
    if (this.stdout.write(data)) done();
    else this.stdout.once('drain', () => { done(); });
  }
}

/**
 * Runs `spec` in a new container with its standard streams attached (docs/backups.md#tasks):
 * stdin is written and closed, stdout goes to the spec's stream, the container is removed at the
 * end whatever happened. Fails only when the engine refuses the container; a tool that fails is
 * a result with its exit code and standard error.
 */
export async function runTask(docker: Docker, spec: TaskSpec, pidsLimit: number): Promise<TaskResult> {
  const withInput = spec.stdin !== undefined;
  let container: Docker.Container;
  try {
    container = await docker.createContainer({
      name: spec.name,
      Image: spec.image,
      Cmd: [...spec.command],
      Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
      Labels: withOwner(spec.owner, spec.labels),
      Tty: false,
      AttachStdin: withInput,
      OpenStdin: withInput,
      StdinOnce: withInput,
      AttachStdout: true,
      AttachStderr: true,
      HostConfig: {
        NanoCpus: Math.round(spec.cpu * 1e9),
        Memory: spec.memoryBytes,
        MemorySwap: spec.memoryBytes,
        NetworkMode: spec.network ?? 'none',
        PidsLimit: pidsLimit,
        ...(spec.mounts === undefined || spec.mounts.length === 0
          ? {}
          : { Mounts: spec.mounts.map((m) => ({ Type: 'volume' as const, Source: m.volume, Target: m.path, ReadOnly: m.readOnly === true })) }),
      },
    });
  } catch (err) {
    throw new Error(`Cannot create the task container ${spec.name} from ${spec.image}: ${engineMessage(err)}`);
  }
  let timedOut = false;
  const kill = (): void => { void container.kill().catch(() => undefined); };
  const timer = setTimeout(() => { timedOut = true; kill(); }, spec.timeoutMs);
  spec.signal?.addEventListener('abort', kill, { once: true });
  try {
    const attached = (await container.attach({ stream: true, stdin: withInput, stdout: true, stderr: true, hijack: withInput }));
    const demux = new Demux(spec.stdout);
    const output = pipeline(attached, demux);
    const exited = container.wait() as Promise<{ StatusCode: number }>;
    try {
      await container.start();
    } catch (err) {
      attached.end();
      throw new Error(`Cannot start the task container ${spec.name}: ${engineMessage(err)}`);
    }
    if (spec.stdin !== undefined) {
      // the input ends with a half-close: the engine closes the task's stdin (StdinOnce)
      const input = spec.stdin;
      input.once('error', kill);
      input.pipe(attached);
    }
    const { StatusCode } = await exited;
    // everything it wrote is read once the engine ends the attached stream
    await Promise.race([output.catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
    spec.stdout?.end();
    const info = await container.inspect().catch(() => null);
    return { exitCode: StatusCode, stderr: demux.stderr, oomKilled: info?.State.OOMKilled === true, timedOut };
  } finally {
    clearTimeout(timer);
    spec.signal?.removeEventListener('abort', kill);
    await container.remove({ force: true, v: true }).catch(() => undefined);
  }
}
