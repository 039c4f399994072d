import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { BackupService } from './backups.service.js';
import type { DestinationService } from './destinations.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './backups.schema.js';

export const backupRoutes: FastifyPluginAsyncTypebox<{ backups: BackupService; destinations: DestinationService }> = async (app, { backups, destinations }) => {
  const base = '/api/workspaces/:slug/databases/:db_slug/backups';

  // members may take one and list them; downloads and deletions are for owners and admins
  app.post(base, { schema: s.createBackup, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(202).send(ok(await backups.create(accessOf(req), req.params.db_slug, req.body))),
  );

  app.get(base, { schema: s.listBackups, config: { action: 'workspace.read' } }, async (req) => ok(await backups.list(accessOf(req), req.params.db_slug)));

  app.get(`${base}/:backup_id`, { schema: s.getBackup, config: { action: 'workspace.read' } }, async (req) =>
    ok(await backups.get(accessOf(req), req.params.db_slug, req.params.backup_id)),
  );

  app.get(`${base}/:backup_id/download`, { schema: s.downloadBackup, config: { action: 'backups.manage' } }, async (req, reply) => {
    const file = await backups.download(accessOf(req), req.params.db_slug, req.params.backup_id);
    reply.type('application/octet-stream').header('content-disposition', `attachment; filename="${file.filename}"`);
    return reply.send(req.method === 'HEAD' ? Readable.from([]) : file.body());
  });

  app.post(`${base}/:backup_id/verify`, { schema: s.verifyBackup, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(202).send(ok(await backups.verify(accessOf(req), req.params.db_slug, req.params.backup_id))),
  );

  const policy = '/api/workspaces/:slug/databases/:db_slug/backup-policy';
  app.get(policy, { schema: s.getBackupPolicy, config: { action: 'workspace.read' } }, async (req) => ok(await backups.getPolicy(accessOf(req), req.params.db_slug)));
  app.put(policy, { schema: s.putBackupPolicy, config: { action: 'backups.manage' } }, async (req) => ok(await backups.putPolicy(accessOf(req), req.params.db_slug, req.body)));
  app.delete(policy, { schema: s.deleteBackupPolicy, config: { action: 'backups.manage' } }, async (req) => ok(await backups.deletePolicy(accessOf(req), req.params.db_slug)));

  app.delete(`${base}/:backup_id`, { schema: s.deleteBackup, config: { action: 'backups.manage' } }, async (req) =>
    ok(await backups.delete(accessOf(req), req.params.db_slug, req.params.backup_id)),
  );

  // in-place restores: owners and admins start them (after a safety backup); members follow them
  const db = '/api/workspaces/:slug/databases/:db_slug';
  app.post(`${db}/restore`, { schema: s.restoreDatabase, config: { action: 'backups.manage' } }, async (req, reply) =>
    reply.code(202).send(ok(await backups.restoreInPlace(accessOf(req), req.params.db_slug, req.body))),
  );
  app.get(`${db}/restores`, { schema: s.listRestores, config: { action: 'workspace.read' } }, async (req) => ok(await backups.restores(accessOf(req), req.params.db_slug)));
  app.get(`${db}/restores/:restore_id`, { schema: s.getRestore, config: { action: 'workspace.read' } }, async (req) => ok(await backups.restoreOf(accessOf(req), req.params.db_slug, req.params.restore_id)));

  // destinations: owners and admins only (their listing names buckets and endpoints)
  const dest = '/api/workspaces/:slug/backup-destinations';
  app.get(dest, { schema: s.listBackupDestinations, config: { action: 'backups.manage' } }, async (req) => ok(await destinations.list(accessOf(req))));
  app.post(dest, { schema: s.createBackupDestination, config: { action: 'backups.manage' } }, async (req, reply) => reply.code(201).send(ok(await destinations.create(accessOf(req), req.body))));
  app.get(`${dest}/:destination_id`, { schema: s.getBackupDestination, config: { action: 'backups.manage' } }, async (req) => ok(await destinations.get(accessOf(req), req.params.destination_id)));
  app.patch(`${dest}/:destination_id`, { schema: s.updateBackupDestination, config: { action: 'backups.manage' } }, async (req) =>
    ok(await destinations.update(accessOf(req), req.params.destination_id, req.body)),
  );
  app.delete(`${dest}/:destination_id`, { schema: s.deleteBackupDestination, config: { action: 'backups.manage' } }, async (req) => ok(await destinations.delete(accessOf(req), req.params.destination_id)));
  app.post(`${dest}/:destination_id/test`, { schema: s.testBackupDestination, config: { action: 'backups.manage' } }, async (req) => ok(await destinations.test(accessOf(req), req.params.destination_id)));
};
