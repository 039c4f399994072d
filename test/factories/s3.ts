// A local S3-protocol server for the backup destinations (docs/backups.md#destinations): s3rver
// from the npm registry, on a free port with its data in a new temporary directory, behind a
// small proxy that can be told to refuse the next upload of an artifact (403 AccessDenied, as a
// provider whose policy allows the connection test but not the write) or to corrupt the next
// artifact it returns (one byte flipped, as a faulty disk or a middlebox would). Slipway's own
// client (the official @aws-sdk/client-s3) talks to the proxy.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import { closeServer } from './git-server.js';

/** s3rver's fixed credentials: requests signed with others are refused (InvalidAccessKeyId). */
export const S3_KEYS = { access_key_id: 'S3RVER', secret_access_key: 'S3RVER' } as const;

export interface LocalS3 {
  /** the proxy: `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** the next PUT of a `.slwb` object is answered 403 AccessDenied (and not stored) */
  refuseNextUpload(): void;
  /** the next GET of a `.slwb` object has one byte of its body flipped */
  corruptNextRead(): void;
  /** the keys of the objects in the bucket (as the proxy saw them stored and not deleted) */
  keys(): Promise<string[]>;
  /** every request the proxy passed on or answered: method and path */
  requests: { method: string; path: string; status: number }[];
  close(): Promise<void>;
}

const ACCESS_DENIED = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>slipwaytest</RequestId></Error>';

export async function startLocalS3(bucket = 'slipway-backups'): Promise<LocalS3> {
  const directory = await mkdtemp(join(tmpdir(), 'slipway-s3-'));
  const s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const { port: s3Port } = (await s3.run());
  let refuse = false;
  let corrupt = false;
  const requests: LocalS3['requests'] = [];

  const proxy = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    const artifact = /\.slwb(\?|$)/.test(path);
    if (req.method === 'PUT' && artifact && refuse) {
      refuse = false;
      req.resume();
      req.on('end', () => {
        requests.push({ method: 'PUT', path, status: 403 });
        res.writeHead(403, { 'content-type': 'application/xml' }).end(ACCESS_DENIED);
      });
      return;
    }
    const flip = req.method === 'GET' && artifact && corrupt;
    if (flip) corrupt = false;
    const up = request({ host: '127.0.0.1', port: s3Port, method: req.method, path, headers: req.headers }, (r) => {
      requests.push({ method: req.method ?? '', path, status: r.statusCode ?? 0 });
      res.writeHead(r.statusCode ?? 502, r.headers);
      if (!flip) {
        r.pipe(res);
        return;
      }
      let done = false;
      r.on('data', (chunk: Buffer) => {
        if (!done && chunk.length > 0) {
          const mid = Math.floor(chunk.length / 2);
          chunk[mid] = (chunk[mid] ?? 0) ^ 0xff;
          done = true;
        }
        res.write(chunk);
      });
      r.on('end', () => res.end());
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${String(port)}`,
    bucket,
    refuseNextUpload: () => { refuse = true; },
    corruptNextRead: () => { corrupt = true; },
    requests,
    async keys() {
      const { S3Client, ListObjectsV2Command } = await import('@aws-sdk/client-s3');
      const c = new S3Client({ endpoint: `http://127.0.0.1:${String(s3Port)}`, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: S3_KEYS.access_key_id, secretAccessKey: S3_KEYS.secret_access_key } });
      try {
        const r = await c.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1000 }));
        return (r.Contents ?? []).map((o) => o.Key ?? '').sort();
      } finally {
        c.destroy();
      }
    },
    async close() {
      await closeServer(proxy);
      await s3.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
