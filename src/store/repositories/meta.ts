import { Repository } from './repository.js';

/** Facts about the installation as a whole. */
export class MetaRepository extends Repository {
  /** This installation's id (made by the migrations, stable for the life of the store). */
  async instanceId(): Promise<string> {
    const row = await this.db.selectFrom('meta').select('value').where('key', '=', 'instance_id').executeTakeFirstOrThrow();
    return row.value;
  }

  /** Whether any value sealed with the secret key is stored: a secret env var, chat webhook URL or Git webhook secret. */
  async holdsSealedValues(): Promise<boolean> {
    const sealedEnv = await this.db.selectFrom('env_vars').select('id').where('is_secret', '=', 1).limit(1).executeTakeFirst();
    const sealedHook = await this.db.selectFrom('uptime_monitors').select('project_id').where('chat_webhook_url', 'is not', null).limit(1).executeTakeFirst();
    const sealedGitHook = await this.db.selectFrom('git_connections').select('project_id').where('webhook_secret', 'is not', null).limit(1).executeTakeFirst();
    return sealedEnv !== undefined || sealedHook !== undefined || sealedGitHook !== undefined;
  }
}
