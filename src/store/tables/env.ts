export interface EnvVarsTable {
  id: string;
  project_id: string;
  key: string;
  /** plaintext, or the sealed form when is_secret = 1 */
  value: string;
  is_secret: number;
  created_at: string;
  updated_at: string;
}

export interface EnvTables {
  env_vars: EnvVarsTable;
}
