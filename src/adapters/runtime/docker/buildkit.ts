// BuildKit builds through the Engine API (`POST /build?version=2`, the context as the request's
// tar body) report their progress as `{"id":"moby.buildkit.trace","aux":"<base64>"}` items, each a
// protobuf `moby.buildkit.v1.StatusResponse`. This reads the few fields a build log needs with a
// minimal protobuf wire-format reader, and turns them into the lines the classic builder's users
// know: `Step 2/3 : COPY …`, then the step's output.
import { LineSplitter } from './feed.js';

interface Vertex {
  digest: string;
  name: string;
  cached: boolean;
  started: boolean;
  completed: boolean;
  error: string;
}

interface VertexLog {
  vertex: string;
  msg: Buffer;
}

export interface BuildKitStatus {
  vertexes: Vertex[];
  logs: VertexLog[];
}

/** The fields of one protobuf message: field number → raw values (varints as numbers, the rest as bytes). */
function fields(buf: Buffer): Map<number, (number | Buffer)[]> {
  const out = new Map<number, (number | Buffer)[]>();
  let at = 0;
  const varint = (): number => {
    let value = 0;
    let shift = 0;
    for (;;) {
      if (at >= buf.length) throw new Error('truncated varint');
      const byte = buf[at++] ?? 0;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
      shift += 7;
    }
  };
  while (at < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    let value: number | Buffer;
    switch (key & 7) {
      case 0:
        value = varint();
        break;
      case 1:
        value = buf.subarray(at, at + 8);
        at += 8;
        break;
      case 2: {
        const length = varint();
        value = buf.subarray(at, at + length);
        at += length;
        break;
      }
      case 5:
        value = buf.subarray(at, at + 4);
        at += 4;
        break;
      default:
        throw new Error(`unsupported protobuf wire type ${String(key & 7)}`);
    }
    if (at > buf.length) throw new Error('truncated field');
    const list = out.get(field);
    if (list === undefined) out.set(field, [value]);
    else list.push(value);
  }
  return out;
}

const bytesOf = (m: Map<number, (number | Buffer)[]>, field: number): Buffer[] => (m.get(field) ?? []).filter((v): v is Buffer => Buffer.isBuffer(v));
const text = (m: Map<number, (number | Buffer)[]>, field: number): string => bytesOf(m, field)[0]?.toString('utf8') ?? '';

/** Decodes the `aux` of a `moby.buildkit.trace` item; throws on malformed data. */
export function decodeStatus(base64: string): BuildKitStatus {
  const message = fields(Buffer.from(base64, 'base64'));
  return {
    vertexes: bytesOf(message, 1).map((raw) => {
      const v = fields(raw);
      return {
        digest: text(v, 1),
        name: text(v, 3),
        cached: (v.get(4) ?? []).some((x) => x === 1),
        started: v.has(5),
        completed: v.has(6),
        error: text(v, 7),
      };
    }),
    logs: bytesOf(message, 3).map((raw) => {
      const l = fields(raw);
      return { vertex: text(l, 1), msg: bytesOf(l, 4)[0] ?? Buffer.alloc(0) };
    }),
  };
}

/**
 * Turns a build's statuses into log lines, in order: each Dockerfile step once when it starts
 * (`Step 2/3 : RUN make`), ` ---> Using cache` when it was cached, its output line by line, and
 * `ERROR: …` when it failed. BuildKit's own internal steps (loading the context) are left out.
 */
export class BuildKitLog {
  private readonly shown = new Set<string>();
  private readonly outputs = new Map<string, LineSplitter>();

  constructor(private readonly onLine: (line: string) => void) {}

  write(status: BuildKitStatus): void {
    for (const v of status.vertexes) {
      if (v.name.startsWith('[internal]')) continue;
      if (v.started && !this.shown.has(v.digest)) {
        this.shown.add(v.digest);
        const step = /^\[(?:[^\]]* )?(\d+)\/(\d+)\] (.*)$/s.exec(v.name);
        this.onLine(step === null ? v.name : `Step ${step[1] ?? ''}/${step[2] ?? ''} : ${step[3] ?? ''}`);
        if (v.cached) this.onLine(' ---> Using cache');
      }
      if (v.completed && v.error !== '') {
        this.outputs.get(v.digest)?.flush();
        this.onLine(`ERROR: ${v.error}`);
      }
    }
    for (const l of status.logs) {
      let splitter = this.outputs.get(l.vertex);
      if (splitter === undefined) {
        splitter = new LineSplitter(this.onLine);
        this.outputs.set(l.vertex, splitter);
      }
      splitter.write(l.msg);
    }
  }

  /** Emits what is left of unfinished output lines. */
  flush(): void {
    for (const splitter of this.outputs.values()) splitter.flush();
  }
}
