import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const CLIENT = new URL('./client.ts', import.meta.url).pathname;

/** What a fresh process (as `slipway serve` is) sees after dockerClient(): printed as JSON. */
async function inFreshProcess(env: Record<string, string>): Promise<Record<string, unknown>> {
  const code = `
    import { createRequire } from 'node:module';
    import { dockerClient } from ${JSON.stringify(CLIENT)};
    const docker = await dockerClient(${JSON.stringify(env)});
    const require = createRequire(import.meta.url);
    const fromDockerode = createRequire(require.resolve('dockerode'));
    const fromModem = createRequire(fromDockerode.resolve('docker-modem'));
    const tryIt = (fn) => { try { fn(); return 'ok'; } catch (err) { return String(err.message); } };
    const grpc = require.cache[fromDockerode.resolve('@grpc/grpc-js')]?.exports;
    const Ssh = require.cache[fromModem.resolve('ssh2')]?.exports?.Client;
    console.log(JSON.stringify({
      client: typeof docker.listContainers,
      grpc: tryIt(() => grpc.Server),
      ssh: tryIt(() => new Ssh()),
      loadedWasm: Object.keys(require.cache).some((p) => p.includes('poly1305')),
    }));
  `;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: new URL('../../../..', import.meta.url).pathname });
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
}

describe('dockerClient', () => {
  it('gives a dockerode client without loading its BuildKit session (gRPC) or ssh2, each failing with a sentence if used', async () => {
    const seen = await inFreshProcess({});
    expect(seen.client).toBe('function');
    expect(seen.grpc).toMatch(/BuildKit session \(gRPC\) is not loaded in Slipway \(Server was asked for\)/);
    expect(seen.ssh).toMatch(/ssh:\/\/ Docker engine needs DOCKER_HOST=ssh:\/\//);
    expect(seen.loadedWasm).toBe(false);
  });

  it('loads ssh2 for real when DOCKER_HOST names an ssh:// engine', async () => {
    const seen = await inFreshProcess({ DOCKER_HOST: 'ssh://builder@example.invalid' });
    expect(seen.grpc).toMatch(/not loaded in Slipway/);
    expect(seen.loadedWasm).toBe(true);
  });
});
