// Helpers for tests that run the built launcher `bin/slipway` as a child process, the way a user does.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SETTINGS } from '../../src/app/config.js';

export const BIN = fileURLToPath(new URL('../../bin/slipway', import.meta.url));
const DIST_MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

/** The launcher runs dist/: fail with a clear message when it has not been built. */
export function assertBuilt(): void {
  if (!existsSync(DIST_MAIN)) throw new Error('dist/main.js is missing: run `make build` (make test does) first.');
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SlipwayProcess {
  readonly args: readonly string[];
  stdout(): string;
  stderr(): string;
  /** null while the process runs */
  exit(): Exit | null;
  readonly exited: Promise<Exit>;
  /** Resolves as soon as stdout contains `text` (checked on every chunk, without polling); rejects when the process exits first. */
  untilStdout(text: string): Promise<void>;
  /** Sends the signal (unless the process has already exited) and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

const live = new Set<SlipwayProcess>();
const SETTING_VARS = new Set<string>(SETTINGS.map((s) => s.env));

/** The test's environment without any `SLIPWAY_*` setting, plus `extra`. */
export function slipwayEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const inherited = Object.entries(process.env).filter(([name]) => !SETTING_VARS.has(name));
  // These tests are about the control plane: no engine or router (and its :8000) unless asked for.
  // Many processes at once: the operator's metrics listener on a port of its own each.
  return { ...Object.fromEntries(inherited), SLIPWAY_ENGINE: 'none', SLIPWAY_METRICS_LISTEN: '127.0.0.1:0', ...extra };
}

/** `node bin/slipway ...args`, with its output collected; killed by killAll(). */
export function startSlipway(args: readonly string[], env: Record<string, string> = {}): SlipwayProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env: slipwayEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let exit: Exit | null = null;
  const waiters = new Set<{ text: string; resolve: () => void }>();
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const w of waiters) {
      if (out.includes(w.text)) {
        waiters.delete(w);
        w.resolve();
      }
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<Exit>((resolve) => {
    child.once('error', (e) => {
      err += `spawn failed: ${e.message}\n`;
      exit ??= { code: null, signal: null };
      resolve(exit);
    });
    child.once('close', (code, signal) => {
      exit ??= { code, signal };
      resolve(exit);
    });
  });
  const proc: SlipwayProcess = {
    args,
    stdout: () => out,
    stderr: () => err,
    exit: () => exit,
    exited,
    untilStdout: (text) =>
      new Promise<void>((resolve, reject) => {
        if (out.includes(text)) {
          resolve();
          return;
        }
        waiters.add({ text, resolve });
        void exited.then(() => { reject(new Error(`slipway exited before printing ${text}; stderr:\n${err}`)); });
      }),
    stop: async (signal = 'SIGKILL') => {
      if (exit === null) child.kill(signal);
      return exited;
    },
  };
  live.add(proc);
  void exited.then(() => live.delete(proc));
  return proc;
}

/** SIGKILL every child still running and wait until each has exited. */
export async function killAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.stop('SIGKILL')));
}

export interface RunResult extends Exit {
  stdout: string;
  stderr: string;
}

/** Runs a command that should end by itself; a command still running after `timeoutMs` is killed and fails the test. */
export async function runSlipway(args: readonly string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<RunResult> {
  const proc = startSlipway(args, env);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => { timer = setTimeout(() => { resolve(null); }, timeoutMs); });
  const exit = await Promise.race([proc.exited, timeout]);
  clearTimeout(timer);
  if (exit === null) {
    await proc.stop('SIGKILL');
    throw new Error(`slipway ${args.join(' ')} did not exit within ${timeoutMs} ms; stderr:\n${proc.stderr()}`);
  }
  return { ...exit, stdout: proc.stdout(), stderr: proc.stderr() };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, ms); });

/** Polls `check` until it returns a value other than undefined; fails early when `proc` exits. */
export async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, proc?: SlipwayProcess, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    const exit = proc?.exit() ?? null;
    if (proc !== undefined && exit !== null) {
      throw new Error(`slipway exited (code ${String(exit.code)}, signal ${String(exit.signal)}) while waiting for ${what}; stderr:\n${proc.stderr()}`);
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; stderr:\n${proc?.stderr() ?? ''}`);
    await sleep(50);
  }
}

/** Waits until GET `${base}/healthz` answers 200. */
export async function waitHealthy(proc: SlipwayProcess, base: string): Promise<void> {
  await waitFor(`${base}/healthz`, async () => {
    try {
      const res = await fetch(`${base}/healthz`);
      await res.body?.cancel();
      return res.status === 200 ? true : undefined;
    } catch {
      return undefined;
    }
  }, proc);
}

/** A TCP port that was free a moment ago (bound on port 0, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => { resolve(port); });
    });
  });
}
