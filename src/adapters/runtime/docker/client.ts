import Module, { createRequire } from 'node:module';
import type Docker from 'dockerode';

/**
 * dockerode requires, when it loads, two things Slipway never calls: gRPC and protobuf for its
 * BuildKit session (`buildImage` with `version: '2'`; Slipway streams the context itself,
 * docs/deploys.md#builders), and ssh2 for `DOCKER_HOST=ssh://…` engines, which instantiates a
 * WebAssembly module with 16 MiB of memory at load. Loading them took ~150 ms of every start and
 * ~16 MiB that stayed resident (docs/operations.md#memory). They are put in the module cache as
 * stand-ins that fail with a sentence if anything ever uses them; ssh2 is loaded for real when
 * DOCKER_HOST names an ssh:// engine.
 */
function leaveOutUnusedParts(env: NodeJS.ProcessEnv): void {
  const require = createRequire(import.meta.url);
  const fromDockerode = createRequire(require.resolve('dockerode'));
  const fromModem = createRequire(fromDockerode.resolve('docker-modem'));
  const standIn = (path: string, exports: unknown) => {
    if (require.cache[path] !== undefined) return;
    const m = new Module(path);
    m.filename = path;
    m.loaded = true;
    m.exports = exports;
    require.cache[path] = m;
  };
  const unavailable = (what: string) =>
    new Proxy({}, {
      get(_, key) {
        // what module loaders and inspectors look for is simply absent
        if (typeof key === 'symbol' || key === '__esModule' || key === 'then') return undefined;
        throw new Error(`${what} is not loaded in Slipway (${key} was asked for).`);
      },
    });
  standIn(fromDockerode.resolve('@grpc/grpc-js'), unavailable("dockerode's BuildKit session (gRPC)"));
  standIn(fromDockerode.resolve('@grpc/proto-loader'), unavailable("dockerode's BuildKit session (protobuf)"));
  if (!(env['DOCKER_HOST'] ?? '').startsWith('ssh://')) {
    // docker-modem reads `require('ssh2').Client` as it loads, and constructs one for ssh:// only
    standIn(fromModem.resolve('ssh2'), {
      Client: function Client() {
        throw new Error('An ssh:// Docker engine needs DOCKER_HOST=ssh://… when Slipway starts.');
      },
    });
  }
}

let loading: Promise<typeof Docker> | undefined;

/**
 * A dockerode client (DOCKER_HOST, else /var/run/docker.sock), its module loaded on first use.
 * `env` decides what is left out of that load (ssh2 unless DOCKER_HOST is ssh://), once per
 * process: a later call with another `env` gets the first call's module. Slipway passes
 * process.env; only client.test.ts passes another, each time in a fresh process.
 */
export async function dockerClient(env: NodeJS.ProcessEnv = process.env): Promise<Docker> {
  loading ??= (async () => {
    leaveOutUnusedParts(env);
    return (await import('dockerode')).default;
  })();
  const DockerClass = await loading;
  return new DockerClass();
}
