import WebSocket from 'ws';

/** A log stream as a client reads it: every text frame, in order. */
export interface StreamSession {
  frames: string[];
  /** resolves with every frame once the server has closed the stream */
  closed: Promise<string[]>;
  /** resolves when `count` frames have arrived */
  received(count: number): Promise<void>;
  /** the client closes the stream */
  close(): void;
}

/** Open a WebSocket log stream with a real client (`ws`). */
export function openStream(url: string, headers: Record<string, string> = {}): StreamSession {
  const ws = new WebSocket(url, { headers });
  const frames: string[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  ws.on('message', (data: Buffer) => {
    frames.push(data.toString('utf8'));
    for (const w of waiters.filter((x) => frames.length >= x.count)) w.resolve();
  });
  const closed = new Promise<string[]>((resolve, reject) => {
    ws.on('close', () => {
      resolve(frames);
    });
    ws.on('error', reject);
  });
  return {
    frames,
    closed,
    received: (count) =>
      new Promise((resolve) => {
        if (frames.length >= count) resolve();
        else waiters.push({ count, resolve });
      }),
    close: () => {
      ws.close();
    },
  };
}
