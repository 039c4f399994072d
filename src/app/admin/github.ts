import type { Config } from '../config.js';
import { GitHubAppError } from '../../adapters/git/github-app.js';
import { iso, systemClock } from '../../domain/clock.js';
import { createDeps } from '../adapters.js';
import type { LogStore } from '../../domain/logs.js';
import { createStore } from '../../store/db.js';
import { CliError } from '../errors.js';

/**
 * `slipway admin link-installation`: the operator links a GitHub App installation to a workspace
 * without the setup-URL flow, vouching that the workspace may use it. GitHub is asked (with the
 * App's JWT) that the installation is one of this App's, for its account name.
 */
export async function linkInstallation(config: Config, input: { workspace: string; installationId: string }): Promise<{ workspace: string; installationId: number; accountLogin: string }> {
  if (!/^[1-9][0-9]{0,15}$/.test(input.installationId) || !Number.isSafeInteger(Number(input.installationId))) {
    throw new CliError(`--installation-id must be a GitHub App installation id, a positive whole number (got "${input.installationId}").`);
  }
  const installationId = Number(input.installationId);
  const store = await createStore(config.databaseUrl);
  let logs: LogStore | undefined;
  try {
    const deps = await createDeps(config, store);
    logs = deps.logs;
    if (deps.github === undefined) throw new CliError('No GitHub App is configured: set --github-app-id and --github-app-private-key-file.');
    const ws = await store.repos.workspaces.bySlug(input.workspace);
    if (ws === undefined) throw new CliError(`There is no workspace "${input.workspace}".`);
    let accountLogin: string;
    try {
      ({ accountLogin } = await deps.github.app.installation(installationId));
    } catch (err) {
      if (err instanceof GitHubAppError) throw new CliError(err.message);
      throw err;
    }
    await store.repos.installations.linkByOperator(ws.id, installationId, accountLogin, iso(systemClock.now()));
    return { workspace: ws.slug, installationId, accountLogin };
  } finally {
    await logs?.close();
    await store.close();
  }
}
