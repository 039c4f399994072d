import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type Docker from 'dockerode';
import type { TaskResult, TaskSpec } from '../../../domain/runtime.js';
import { engineMessage } from './engine.js';
import { withOwner } from './labels.js';

/** How much of a task's standard error is kept for its result. */
const STDERR_TAIL = 8 * 1024;
/** How long the attached stream may stay silent after the task exited, while its reader is not the one behind. */
const OUTPUT_IDLE_MS = 10_000;

/** Whether the attached stream ended (true), or stayed silent too long after the task exited (false). */
async function drained(output: Promise<void>, demux: Demux): Promise<boolean> {
  const ended = output.then(() => true, () => true);
  for (;;) {
    if (await Promise.race([ended, new Promise<false>((r) => setTimeout(() => { r(false); }, 250))])) return true;
    if (!demux.waiting && Date.now() - demux.lastActivity > OUTPUT_IDLE_MS) return false;
  }
}

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
  /** when a chunk last came in or the reader last took one (Date.now()) */
  lastActivity = Date.now();
  /** waiting for the reader: the engine's stream is not what is slow */
  waiting = false;

  constructor(private readonly stdout: NodeJS.WritableStream | undefined) {
    super();
  }

  get stderr(): string {
    return this.tail;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.lastActivity = Date.now();
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
    else {
      this.waiting = true;
      this.stdout.once('drain', () => {
        this.waiting = false;
        this.lastActivity = Date.now();
        done();
      });
    }
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
        // what it writes goes to its reader only: the engine's log driver would copy (and JSON-escape) every byte of a dump
        LogConfig: { Type: 'none', Config: {} },
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
  const watch = { started: false, over: false };
  const kill = (): void => { void container.kill().catch(() => undefined); };
  const timer = setTimeout(() => { timedOut = true; kill(); }, spec.timeoutMs);
  spec.signal?.addEventListener('abort', kill, { once: true });
  try {
    const attached = (await container.attach({ stream: true, stdin: withInput, stdout: true, stderr: true, hijack: withInput }));
    const demux = new Demux(spec.stdout);
    const output = pipeline(attached, demux);
    // asked before the start, so no exit is missed: `next-exit`, since the default (`not-running`)
    // answers at once for a container that is only created, with status 0 (every task "succeeded")
    // (and, should the start and the exit come before the engine has the wait, its state says it)
    const exited = Promise.race([
      container.wait({ condition: 'next-exit' }) as Promise<{ StatusCode: number }>,
      (async () => {
        while (!watch.over) {
          await new Promise((r) => setTimeout(r, 1_000));
          if (!watch.started) continue;
          const state = (await container.inspect().catch(() => null))?.State;
          if (state !== undefined && (state.Status === 'exited' || state.Status === 'dead')) return { StatusCode: state.ExitCode };
        }
        return new Promise<never>(() => undefined);
      })(),
    ]).finally(() => { watch.over = true; });
    try {
      await container.start();
      watch.started = true;
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
    if (spec.stdin !== undefined) {
      // a task that ended before it read all of its input: the rest is not sent, and our half of
      // the connection is closed, so that the engine ends the attached stream
      (spec.stdin as NodeJS.ReadableStream & { unpipe(dest?: NodeJS.WritableStream): unknown }).unpipe(attached);
      attached.end();
    }
    // everything it wrote is read once the engine ends the attached stream, however long the
    // reader takes over it (a large dump is still draining when the tool has exited); only an
    // engine stream that stays silent while nothing waits for the reader is given up on, and then
    // the output is incomplete, which is a failure, never a short result
    const ended = await drained(output, demux);
    if (!ended) {
      (spec.stdout as { destroy?: (err: Error) => void } | undefined)?.destroy?.(new Error('the task\'s output did not reach its end'));
      throw new Error(`The output of the task container ${spec.name} did not reach its end (the engine's stream stayed silent for ${String(OUTPUT_IDLE_MS / 1000)} s after it exited).`);
    }
    spec.stdout?.end();
    const info = await container.inspect().catch(() => null);
    return { exitCode: StatusCode, stderr: demux.stderr, oomKilled: info?.State.OOMKilled === true, timedOut };
  } finally {
    watch.over = true;
    clearTimeout(timer);
    spec.signal?.removeEventListener('abort', kill);
    await container.remove({ force: true, v: true }).catch(() => undefined);
  }
}
