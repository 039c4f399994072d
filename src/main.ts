import { Command, Option } from 'commander';
import { ConfigError, resolveConfig, SETTINGS, type RawSettings } from './app/config.js';
import { CliError, StartError } from './app/errors.js';
import { VERSION } from './app/version.js';

// Each command loads what it runs when it runs (`await import`): `--version`, `--help` and the admin
// commands start without loading the API, the engine and their dependencies (docs/architecture.md).

const camel = (flag: string): string => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

function withSettings(cmd: Command): Command {
  for (const s of SETTINGS) {
    cmd.addOption(new Option(`--${s.flag} <value>`, `${s.help} (env ${s.env}, default "${s.def}")`));
  }
  return cmd;
}

function rawSettings(opts: Record<string, unknown>): RawSettings {
  const out: RawSettings = {};
  for (const s of SETTINGS) {
    const v = opts[camel(s.flag)];
    if (typeof v === 'string') out[s.flag] = v;
  }
  return out;
}

function fail(err: unknown): never {
  if (err instanceof ConfigError || err instanceof CliError) {
    process.stderr.write(`slipway: ${err.message}\n`);
    process.exit(2);
  }
  if (err instanceof StartError) {
    process.stderr.write(`slipway: ${err.message}\n`);
    process.exit(1);
  }
  throw err;
}

const program = new Command('slipway').description('Self-hostable deployment platform').version(VERSION);

withSettings(program.command('serve').description('start the API (and, in later versions, the router and workers)')).action(
  async (opts: Record<string, unknown>) => {
    let running;
    try {
      const { startServer } = await import('./app/server.js');
      running = await startServer(resolveConfig(rawSettings(opts), process.env));
    } catch (err) {
      fail(err);
    }
    const { bootstrapped, url } = running;
    if (bootstrapped !== null) {
      process.stdout.write(
        [
          '',
          `Slipway bootstrapped: owner ${bootstrapped.email}, workspace "${bootstrapped.workspace}".`,
          `API key (shown once; also saved to ${bootstrapped.keyFile}):`,
          `  ${bootstrapped.key}`,
          `Try: curl -H "X-API-Key: $(cat ${bootstrapped.keyFile})" ${url.replace('0.0.0.0', '127.0.0.1')}/api/workspaces`,
          '',
        ].join('\n') + '\n',
      );
    }
    const stop = (signal: string) => {
      running.app.log.info({ signal }, 'shutting down');
      running.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.once('SIGTERM', () => { stop('SIGTERM'); });
    process.once('SIGINT', () => { stop('SIGINT'); });
  },
);

const admin = program.command('admin').description('operate on the store directly');
withSettings(
  admin
    .command('create-user')
    .description('create a user, add them to a workspace and print an API key for them')
    .requiredOption('--email <email>', 'e-mail of the new user')
    .option('--name <name>', 'display name (default: the part before @)')
    .option('--workspace <slug>', 'workspace to join', 'default')
    .option('--role <role>', 'owner, admin or member', 'member'),
).action(async (opts: Record<string, unknown>) => {
  try {
    const config = resolveConfig(rawSettings(opts), process.env);
    const { createUser } = await import('./app/admin/admin.js');
    const r = await createUser(config, {
      email: String(opts['email']),
      workspace: String(opts['workspace']),
      role: String(opts['role']),
      name: typeof opts['name'] === 'string' ? opts['name'] : undefined,
    });
    process.stdout.write(`${r.key}\n`);
    process.stderr.write(`Created user ${r.userId}; the key expires at ${r.expiresAt}.\n`);
  } catch (err) {
    fail(err);
  }
});

withSettings(
  admin
    .command('verify-user')
    .description("vouch for a user's e-mail address: they may create workspaces, and their first gets the starting credit")
    .requiredOption('--email <email>', 'e-mail of the user'),
).action(async (opts: Record<string, unknown>) => {
  try {
    const config = resolveConfig(rawSettings(opts), process.env);
    const { verifyUser } = await import('./app/admin/admin.js');
    const r = await verifyUser(config, { email: String(opts['email']) });
    process.stderr.write(r.already ? `User ${r.userId} (${r.email}) was already verified, at ${r.verifiedAt}.\n` : `Verified user ${r.userId} (${r.email}).\n`);
  } catch (err) {
    fail(err);
  }
});

withSettings(
  admin
    .command('link-installation')
    .description("link a GitHub App installation to a workspace without the setup-URL flow (the operator vouches for it)")
    .requiredOption('--workspace <slug>', 'workspace whose Git connections may use the installation')
    .requiredOption('--installation-id <id>', 'the GitHub App installation id'),
).action(async (opts: Record<string, unknown>) => {
  try {
    const config = resolveConfig(rawSettings(opts), process.env);
    const { linkInstallation } = await import('./app/admin/github.js');
    const r = await linkInstallation(config, { workspace: String(opts['workspace']), installationId: String(opts['installationId']) });
    process.stderr.write(`Linked GitHub App installation ${String(r.installationId)} (account ${r.accountLogin}) to workspace ${r.workspace}.\n`);
  } catch (err) {
    fail(err);
  }
});

withSettings(
  admin
    .command('grant-credit')
    .description("credit a workspace's wallet without a payment: one ledger row of type grant, with the reason (the audited way to give credit; docs/billing.md#grants)")
    .requiredOption('--workspace <slug>', 'workspace whose wallet is credited')
    .requiredOption('--amount <amount>', "major units of the wallet's currency, at most its minor-unit decimals: 25 or 12.50 (USD)")
    .option('--reason <text>', 'why, kept in the ledger row the workspace sees (one line)'),
).action(async (opts: Record<string, unknown>) => {
  try {
    const config = resolveConfig(rawSettings(opts), process.env);
    const { grantCredit } = await import('./app/admin/admin.js');
    const line = await grantCredit(config, {
      workspace: String(opts['workspace']),
      amount: String(opts['amount']),
      reason: typeof opts['reason'] === 'string' ? opts['reason'] : undefined,
    });
    process.stderr.write(`${line}\n`);
  } catch (err) {
    fail(err);
  }
});

withSettings(
  admin
    .command('backup')
    .description("write one archive of the control plane (the store, the runtime logs, the secret key), sealed with a passphrase; safe while the server runs (docs/operations.md#disaster-recovery)")
    .requiredOption('--out <file>', 'the archive to write (mode 0600; it appears only once complete)')
    .requiredOption('--passphrase-file <file>', 'a file holding the passphrase (12 characters or more; keep it apart from the archive)'),
).action(async (opts: Record<string, unknown>) => {
  try {
    const config = resolveConfig(rawSettings(opts), process.env);
    const { backupControlPlane } = await import('./app/admin/control-plane.js');
    const r = await backupControlPlane(config, { out: String(opts['out']), passphraseFile: String(opts['passphraseFile']) });
    const c = r.manifest.counts;
    process.stderr.write(`Wrote ${String(opts['out'])} (${String(r.bytes)} bytes): the ${r.manifest.store} store with ${String(c['workspaces'])} workspaces, ${String(c['users'])} users, ${String(c['api_keys'])} API keys, ${String(c['projects'])} projects, ${String(c['databases'])} databases; ${r.manifest.entries.join(', ')}.\n`);
  } catch (err) {
    fail(err);
  }
});

withSettings(
  admin
    .command('restore')
    .description('restore an archive of `slipway admin backup` into a new data dir (and, for a PostgreSQL store, the empty database --database-url names), then check it against its manifest')
    .argument('<file>', 'the archive')
    .requiredOption('--passphrase-file <file>', 'the file holding the passphrase it was sealed with'),
).action(async (file: string, opts: Record<string, unknown>) => {
  try {
    const config = resolveConfig(rawSettings(opts), process.env);
    const { restoreControlPlane } = await import('./app/admin/control-plane.js');
    const r = await restoreControlPlane(config, { file, passphraseFile: String(opts['passphraseFile']) });
    const c = r.counts;
    process.stderr.write(`Restored the ${r.manifest.store} store of ${r.manifest.created_at} into ${config.dataDir}: ${String(c['workspaces'])} workspaces, ${String(c['users'])} users, ${String(c['api_keys'])} API keys, ${String(c['projects'])} projects, ${String(c['databases'])} databases, as in the archive's manifest. Start it with: slipway serve --data-dir ${config.dataDir}\n`);
  } catch (err) {
    fail(err);
  }
});

await program.parseAsync(process.argv);
