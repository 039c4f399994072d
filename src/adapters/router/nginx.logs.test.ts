import { appendFile, mkdtemp, readFile, rename, rm, truncate, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NginxLogs } from './nginx.logs.js';

const cleanup: string[] = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function logsIn(rotateBytes?: number): Promise<{ dir: string; error: string; access: string; logs: NginxLogs }> {
  const dir = await mkdtemp(join(tmpdir(), 'slipway-nginx-logs-'));
  cleanup.push(dir);
  const error = join(dir, 'error.log');
  const access = join(dir, 'access.log');
  return { dir, error, access, logs: new NginxLogs(error, [access], rotateBytes) };
}

const line = (level: string, text: string) => `2026/11/23 19:00:00 [${level}] 1#1: ${text}\n`;

describe('NginxLogs', () => {
  it('reports only the error lines written since the mark, not older ones', async () => {
    const { error, logs } = await logsIn();
    await writeFile(error, line('emerg', 'old failure') + line('warn', 'old warning'));
    const mark = await logs.mark();
    expect(await logs.errorsSince(mark)).toEqual([]);
    await appendFile(error, line('warn', 'new warning') + line('emerg', 'bind() failed'));
    expect(await logs.errorsSince(mark)).toEqual([line('emerg', 'bind() failed').trimEnd()]);
  });

  it('reads what follows the mark of a log past 2 GiB (a whole read fails there)', async () => {
    const { error, logs } = await logsIn();
    await writeFile(error, '');
    await truncate(error, 2 ** 31 + 1024); // sparse: takes no disk space
    await appendFile(error, line('emerg', 'old failure'));
    const mark = await logs.mark();
    await appendFile(error, line('crit', 'new failure'));
    expect(await logs.errorsSince(mark)).toEqual([line('crit', 'new failure').trimEnd()]);
  });

  it('follows a rotation between the mark and the read: the rest of the old file, then the new one', async () => {
    const { error, logs } = await logsIn();
    await writeFile(error, line('error', 'before the mark'));
    const mark = await logs.mark();
    await appendFile(error, line('error', 'after the mark, before the rotation'));
    await rename(error, `${error}.1`);
    await writeFile(error, line('error', 'after the rotation'));
    expect(await logs.errorsSince(mark)).toEqual([line('error', 'after the mark, before the rotation').trimEnd(), line('error', 'after the rotation').trimEnd()]);
  });

  it('rotates the logs past the size to .1, keeping one old file, and asks nginx to reopen them', async () => {
    const { dir, error, access, logs } = await logsIn(100);
    await writeFile(error, 'e'.repeat(150));
    await writeFile(access, 'a'.repeat(50));
    let reopened = 0;
    // nginx creates the file anew when it reopens its logs
    const reopen = () => { reopened += 1; void writeFile(error, ''); };
    expect(await logs.rotate(reopen)).toBe(true);
    expect(reopened).toBe(1);
    expect(await readFile(`${error}.1`, 'utf8')).toBe('e'.repeat(150));
    expect(existsSync(`${access}.1`)).toBe(false);

    expect(await logs.rotate(reopen)).toBe(false);
    expect(reopened).toBe(1);

    await writeFile(error, 'f'.repeat(120));
    await writeFile(access, 'b'.repeat(120));
    expect(await logs.rotate(reopen)).toBe(true);
    expect(await readFile(`${error}.1`, 'utf8')).toBe('f'.repeat(120));
    expect(await readFile(`${access}.1`, 'utf8')).toBe('b'.repeat(120));
    expect(existsSync(join(dir, 'error.log.2'))).toBe(false);
  });

  it('rotates nginx\'s standard error only while nginx is stopped, since it is not reopened on USR1', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'slipway-nginx-logs-'));
    cleanup.push(dir);
    const stderr = join(dir, 'stderr.log');
    const logs = new NginxLogs(join(dir, 'error.log'), [], 100, [stderr]);
    await writeFile(stderr, 's'.repeat(150));
    let reopened = 0;
    expect(await logs.rotate(() => { reopened += 1; })).toBe(false);
    expect(reopened).toBe(0);
    expect(existsSync(`${stderr}.1`)).toBe(false);

    expect(await logs.rotate(undefined)).toBe(true);
    expect(await readFile(`${stderr}.1`, 'utf8')).toBe('s'.repeat(150));
    expect(existsSync(stderr)).toBe(false);
  });
});
