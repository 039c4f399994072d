import { createSocket, type RemoteInfo } from 'node:dgram';

/**
 * A tiny authoritative DNS server over UDP on 127.0.0.1 for tests: it answers TXT and A queries
 * from the records the test sets, NXDOMAIN for names it has none for, and an empty answer for
 * other types (AAAA included). Slipway's `--dns-servers 127.0.0.1:<port>` (Platform.domains
 * dnsServers) points domain verification at it. Hand-written (RFC 1035, section 4): no EDNS, no
 * compression in what it reads, one question per query, as Node's resolver (c-ares) sends them.
 */
export interface TestDns {
  /** `127.0.0.1:<port>`, as Resolver.setServers takes it */
  readonly server: string;
  setTxt(name: string, values: readonly string[]): void;
  setA(name: string, addresses: readonly string[]): void;
  /** forgets every record of the name */
  clear(name: string): void;
  /** the names asked, lowercase, in order (`TXT _slipway-challenge.shop.example.com`) */
  readonly asked: string[];
  close(): Promise<void>;
}

const TYPE_A = 1;
const TYPE_TXT = 16;
const TYPE_NAMES: Record<number, string> = { 1: 'A', 16: 'TXT', 28: 'AAAA' };

interface Records {
  txt: string[];
  a: string[];
}

/** The question's name (labels, no compression), its type and where the question ends. */
function readQuestion(msg: Buffer): { name: string; type: number; end: number } | null {
  let at = 12;
  const labels: string[] = [];
  for (;;) {
    const len = msg[at];
    if (len === undefined || len > 63) return null;
    at += 1;
    if (len === 0) break;
    if (at + len > msg.length) return null;
    labels.push(msg.subarray(at, at + len).toString('ascii'));
    at += len;
  }
  if (at + 4 > msg.length) return null;
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(at), end: at + 4 };
}

function txtData(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length || i === 0; i += 255) {
    const chunk = bytes.subarray(i, i + 255);
    parts.push(Buffer.from([chunk.length]), chunk);
  }
  return Buffer.concat(parts);
}

function answer(type: number, data: Buffer): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
  head.writeUInt16BE(type, 2);
  head.writeUInt16BE(1, 4); // IN
  head.writeUInt32BE(1, 6); // TTL: 1 s, so that a record set later is seen at once
  head.writeUInt16BE(data.length, 10);
  return Buffer.concat([head, data]);
}

function reply(query: Buffer, records: ReadonlyMap<string, Records>, asked: string[]): Buffer | null {
  if (query.length < 12) return null;
  const q = readQuestion(query);
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // id
  const rd = (query[2] ?? 0) & 0x01;
  if (q === null) {
    header.writeUInt16BE(0x8000 | (rd << 8) | 0x80 | 1, 2); // FORMERR
    return header;
  }
  asked.push(`${TYPE_NAMES[q.type] ?? q.type.toString()} ${q.name}`);
  const known = records.get(q.name);
  const answers =
    known === undefined
      ? []
      : q.type === TYPE_TXT
        ? known.txt.map((v) => answer(TYPE_TXT, txtData(v)))
        : q.type === TYPE_A
          ? known.a.map((a) => answer(TYPE_A, Buffer.from(a.split('.').map(Number))))
          : [];
  // QR, AA, RD as asked, RA; rcode NXDOMAIN (3) for a name without records
  header.writeUInt16BE(0x8000 | 0x0400 | (rd << 8) | 0x80 | (known === undefined ? 3 : 0), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  return Buffer.concat([header, query.subarray(12, q.end), ...answers]);
}

export async function startDnsServer(): Promise<TestDns> {
  const records = new Map<string, Records>();
  const asked: string[] = [];
  const socket = createSocket('udp4');
  socket.on('message', (msg: Buffer, from: RemoteInfo) => {
    const out = reply(msg, records, asked);
    if (out !== null) socket.send(out, from.port, from.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      resolve();
    });
  });
  const entry = (name: string): Records => {
    const key = name.toLowerCase();
    let r = records.get(key);
    if (r === undefined) {
      r = { txt: [], a: [] };
      records.set(key, r);
    }
    return r;
  };
  return {
    server: `127.0.0.1:${socket.address().port.toString()}`,
    setTxt: (name, values) => {
      entry(name).txt = [...values];
    },
    setA: (name, addresses) => {
      entry(name).a = [...addresses];
    },
    clear: (name) => {
      records.delete(name.toLowerCase());
    },
    asked,
    close: () =>
      new Promise<void>((resolve) => {
        socket.close(() => {
          resolve();
        });
      }),
  };
}
