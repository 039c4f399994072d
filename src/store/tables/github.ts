/** A GitHub App installation linked to a workspace (its Git connections may use it). */
export interface GitHubInstallationsTable {
  workspace_id: string;
  /** bigint (string from pg) */
  installation_id: string | number;
  /** the account the app is installed on */
  account_login: string;
  /** the user who proved control of the installation */
  linked_by: string | null;
  created_at: string;
}

/** An unused `state` of the installation link flow (single-use: deleted when redeemed). */
export interface GitHubLinkStatesTable {
  nonce: string;
  workspace_id: string;
  user_id: string;
  expires_at: string;
}

export interface GithubTables {
  github_installations: GitHubInstallationsTable;
  github_link_states: GitHubLinkStatesTable;
}
