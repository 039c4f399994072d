import { open, rename, stat } from 'node:fs/promises';

/**
 * nginx's own log files in the router directory: what a start or a reload wrote to the error
 * log (read from where it stood, never the whole file), and their rotation (renamed to `.1`,
 * the previous `.1` dropped, nginx told to reopen them with USR1).
 */
export interface LogMark {
  /** the file's inode when marked (-1: it did not exist) */
  readonly ino: number;
  readonly size: number;
}

/** At most this much of what was written since a mark is read: a message names the last errors. */
const READ_LIMIT = 64 * 1024;
const ERROR_LINE = /\[(emerg|alert|crit|error)\]/;

export const DEFAULT_LOG_ROTATE_BYTES = 16 * 1024 * 1024;

const sleep = (ms: number): Promise<void> => new Promise((r) => { setTimeout(r, ms); });

export class NginxLogs {
  constructor(
    private readonly errorLog: string,
    /** the other logs rotated with it (the access log) */
    private readonly others: readonly string[],
    /** a log larger than this is rotated */
    private readonly rotateBytes: number = DEFAULT_LOG_ROTATE_BYTES,
    /**
     * logs nginx does not reopen on USR1 (its standard error, given at start): rotated only while
     * nginx is not running, before a start, since a running master would go on writing the
     * renamed file
     */
    private readonly whileStopped: readonly string[] = [],
  ) {}

  /** Where the error log stands now. */
  async mark(file = this.errorLog): Promise<LogMark> {
    try {
      const s = await stat(file);
      return { ino: s.ino, size: s.size };
    } catch {
      return { ino: -1, size: 0 };
    }
  }

  /**
   * What `file` got since `mark`, up to READ_LIMIT (the newest part): when the file was rotated
   * meanwhile, the rest of the old one and the new one; when it was truncated, all of it.
   */
  async since(mark: LogMark, file = this.errorLog): Promise<string> {
    const now = await this.mark(file);
    if (now.ino === mark.ino || mark.ino === -1) return readRange(file, now.size < mark.size ? 0 : mark.size, now.size);
    const rotated = `${file}.1`;
    const old = await this.mark(rotated);
    const before = old.ino === mark.ino ? await readRange(rotated, Math.min(mark.size, old.size), old.size) : '';
    return `${before}${await readRange(file, 0, now.size)}`;
  }

  /** The error lines (emerg, alert, crit, error) the error log got since `mark`. */
  async errorsSince(mark: LogMark): Promise<string[]> {
    return (await this.since(mark)).split('\n').filter((l) => ERROR_LINE.test(l));
  }

  /**
   * Renames each log past the size to `<name>.1` (replacing the previous one), then has a
   * running nginx reopen its logs (`reopen` sends USR1) and waits until it has created the
   * error log anew, so that a mark taken next is on the file nginx writes. Without `reopen`
   * (nginx is not running) the logs of `whileStopped` are rotated too. True when it rotated.
   */
  async rotate(reopen: (() => void) | undefined): Promise<boolean> {
    let rotated = false;
    let errorLogRotated = false;
    for (const file of [this.errorLog, ...this.others, ...(reopen === undefined ? this.whileStopped : [])]) {
      const { size } = await this.mark(file);
      if (size <= this.rotateBytes) continue;
      await rename(file, `${file}.1`);
      rotated = true;
      if (file === this.errorLog) errorLogRotated = true;
    }
    if (!rotated || reopen === undefined) return rotated;
    reopen();
    for (let i = 0; errorLogRotated && i < 100; i++) {
      if ((await this.mark()).ino !== -1) break;
      await sleep(20);
    }
    return true;
  }
}

/** [from, to) of a file, at most READ_LIMIT bytes (the end), as text; '' when it cannot be read. */
async function readRange(file: string, from: number, to: number): Promise<string> {
  if (to <= from) return '';
  const start = Math.max(from, to - READ_LIMIT);
  let handle;
  try {
    handle = await open(file, 'r');
  } catch {
    return '';
  }
  try {
    const buffer = Buffer.alloc(to - start);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start);
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    // cut into the middle of a line: start at the next one
    return start > from ? text.slice(text.indexOf('\n') + 1) : text;
  } catch {
    return '';
  } finally {
    await handle.close();
  }
}
