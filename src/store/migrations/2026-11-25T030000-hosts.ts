import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Host names are unique platform-wide, enforced by the store (docs/router.md "Host names"):
//
// - `projects.host_label`: the first label of the project's default host
//   (`<host_label>.<apps domain>`), written with the project and uniquely indexed. Before, the
//   host was derived as `<project>-<workspace>` at read time, and `shop-api` in `alpha` and
//   `shop` in `api-alpha` got the same host. Existing projects get `<project>-<workspace>`; when
//   two already share one, the oldest project (created first) keeps it and each later one gets
//   `<project>-<workspace>` cut to fit and followed by `-` and 8 characters of its id: its URL
//   changes, and it had never been reachable under the old one (the other project served it).
//   On SQLite the column stays nullable (ALTER TABLE cannot add NOT NULL there); the service
//   always writes it. On PostgreSQL it is NOT NULL.
// - `domains`: a custom domain is proven before it is routed. Each row gets a
//   `verification_token` (the TXT record `_slipway-challenge.<domain>` carries
//   `slipway-verify=<token>`) and `verified_at`. Only verified names are unique platform-wide
//   (partial unique index): a pending claim does not block the name's owner; a project claims a
//   name at most once. Rows verified before (their certificate was issued: the CA reached this
//   installation under that name) stay verified; the others are pending from now on.
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema.alterTable('projects').addColumn('host_label', 'text').execute();
  const projects = await sql<{ id: string; project: string; workspace: string }>`
    select p.id as id, p.slug as project, w.slug as workspace
    from projects p join workspaces w on w.id = p.workspace_id
    order by p.created_at, p.id`.execute(db);
  const taken = new Set<string>();
  for (const p of projects.rows) {
    let label = `${p.project}-${p.workspace}`;
    if (taken.has(label)) {
      const suffix = p.id.replace(/[^a-z0-9]/gi, '').slice(-8).toLowerCase();
      const base = label.slice(0, 63 - 1 - suffix.length).replace(/-+$/, '');
      label = `${base}-${suffix}`;
      for (let i = 0; taken.has(label); i++) label = `${base.slice(0, 63 - 2 - suffix.length - i.toString().length)}-${suffix}${i.toString()}`;
    }
    taken.add(label);
    await sql`update projects set host_label = ${label} where id = ${p.id}`.execute(db);
  }
  await db.schema.createIndex('projects_host_label_uq').on('projects').column('host_label').unique().execute();
  if (dialect === 'postgres') await sql`alter table projects alter column host_label set not null`.execute(db);

  // domains: the column-level UNIQUE on `domain` goes (SQLite cannot drop it: the table is rebuilt).
  if (dialect === 'postgres') {
    await sql`alter table domains drop constraint if exists domains_domain_key`.execute(db);
    await db.schema.alterTable('domains').addColumn('verification_token', 'text').execute();
    await db.schema.alterTable('domains').addColumn('verified_at', 'text').execute();
  } else {
    await db.schema
      .createTable('domains_next')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
      .addColumn('domain', 'text', (c) => c.notNull())
      .addColumn('verified', 'integer', (c) => c.notNull())
      .addColumn('verification_token', 'text', (c) => c.notNull())
      .addColumn('verified_at', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await sql`insert into domains_next (id, project_id, domain, verified, verification_token, created_at)
              select id, project_id, domain, verified, lower(hex(randomblob(16))), created_at from domains`.execute(db);
    await sql`drop table domains`.execute(db);
    await sql`alter table domains_next rename to domains`.execute(db);
    await db.schema.createIndex('domains_project_idx').on('domains').column('project_id').execute();
  }
  if (dialect === 'postgres') {
    const domains = await sql<{ id: string }>`select id from domains`.execute(db);
    for (const d of domains.rows) {
      await sql`update domains set verification_token = ${randomBytes(16).toString('hex')} where id = ${d.id}`.execute(db);
    }
    await sql`alter table domains alter column verification_token set not null`.execute(db);
  }
  await sql`update domains set verified_at = created_at where verified = 1`.execute(db);
  await db.schema.createIndex('domains_project_domain_uq').on('domains').columns(['project_id', 'domain']).unique().execute();
  await db.schema
    .createIndex('domains_verified_domain_uq')
    .on('domains')
    .column('domain')
    .unique()
    .where(sql.ref('verified'), '=', 1)
    .execute();
  await db.schema.createIndex('domains_pending_idx').on('domains').column('verified').execute();
}
