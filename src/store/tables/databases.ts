/** A managed database (docs/databases.md). */
export interface DatabasesTable {
  id: string;
  workspace_id: string;
  name: string;
  slug: string;
  /** postgresql | mysql | redis | mongo */
  type: string;
  /** container (a server of its own) | shared (a database and a user on the operator's server) */
  provisioner: string;
  /** provisioning | running | failed | deleting */
  status: string;
  /** why it failed, readable; null otherwise */
  error: string | null;
  /** the image its container runs (container provisioner), once chosen */
  image: string | null;
  /** where apps on the workspace network reach it */
  host: string;
  port: number;
  /** where the host reaches it (published port); null when not published */
  external_host: string | null;
  external_port: number | null;
  username: string;
  /** sealed with the secret key (context `database:<id>`) */
  password: string;
  database_name: string;
  memory_mb: number;
  /** the template instance that provisioned it (it goes with the instance); null when made on its own */
  owner_project_id: string | null;
  /** the backup it is restored from before it is `running` (docs/backups.md#restore); null otherwise */
  restore_from: string | null;
  created_at: string;
  updated_at: string;
}

export interface DatabaseEventsTable {
  id: string;
  database_id: string;
  at: string;
  message: string;
}

export interface DatabasesTables {
  databases: DatabasesTable;
  database_events: DatabaseEventsTable;
}
