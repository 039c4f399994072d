import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { templateRef } from '../projects/resolve.js';
import type { TemplateService } from './templates.service.js';
import type { EnvService } from '../env/env.service.js';
import type { DomainService } from '../domains/domains.service.js';
import type { DeploymentService } from '../deployments/deployments.service.js';
import type { DeployService } from '../deployments/deploy.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './templates.schema.js';

/**
 * Template instances (docs/templates.md): the catalog, the instances, and their env, domains,
 * deployments and actions, answered by the projects' own services through `templateRef`.
 */
export const templateRoutes: FastifyPluginAsyncTypebox<{ templates: TemplateService; envVars: EnvService; domains: DomainService; deployments: DeploymentService; deploys: DeployService }> = async (app, { templates, envVars, domains, deployments, deploys }) => {
  const base = '/api/workspaces/:slug/templates';
  const one = `${base}/:template_slug`;
  const read = { action: 'workspace.read' } as const;
  const operate = { action: 'workspace.operate' } as const;

  app.get('/api/workspaces/available-templates', { schema: s.availableTemplates }, () => ok(templates.available()));

  app.post(base, { schema: s.createTemplate, config: operate }, async (req, reply) => reply.code(201).send(ok(await templates.create(accessOf(req), req.body))));
  app.get(base, { schema: s.listTemplates, config: read }, async (req) => ok(await templates.list(accessOf(req))));
  app.get(one, { schema: s.getTemplate, config: read }, async (req) => ok(await templates.get(accessOf(req), req.params.template_slug)));
  app.put(one, { schema: s.updateTemplate, config: operate }, async (req) => ok(await templates.update(accessOf(req), req.params.template_slug, req.body)));
  app.delete(one, { schema: s.deleteTemplate, config: operate }, async (req) =>
    ok(
      await templates.delete(accessOf(req), req.params.template_slug, (err) => {
        req.log.error({ err }, 'the template instance is deleted, but its logs could not be; they age out with the workspace retention');
      }),
    ),
  );

  app.post(`${one}/deploy`, { schema: s.deployTemplate, config: operate }, async (req, reply) =>
    reply.code(202).send(ok(await templates.deploy(accessOf(req), req.params.template_slug, req.body.mode))),
  );
  app.post(`${one}/stop`, { schema: s.stopTemplate, config: operate }, async (req) => ok(await templates.stop(accessOf(req), req.params.template_slug)));
  app.post(`${one}/redeploy`, { schema: s.redeployTemplate, config: operate }, async (req, reply) =>
    reply.code(202).send(ok(await deploys.redeploy(accessOf(req), templateRef(req.params.template_slug)))),
  );
  app.post(`${one}/deployments/:id/rollback`, { schema: s.rollbackTemplate, config: operate }, async (req, reply) =>
    reply.code(202).send(ok(await deploys.rollback(accessOf(req), templateRef(req.params.template_slug), req.params.id))),
  );

  app.get(`${one}/envs`, { schema: s.listTemplateEnv, config: read }, async (req) => ok(await envVars.list(accessOf(req), templateRef(req.params.template_slug))));
  app.post(`${one}/envs`, { schema: s.setTemplateEnv, config: operate }, async (req) => ok(await envVars.setMany(accessOf(req), templateRef(req.params.template_slug), req.body)));
  app.delete(`${one}/envs/:key`, { schema: s.deleteTemplateEnv, config: operate }, async (req) =>
    ok(await envVars.removeKey(accessOf(req), templateRef(req.params.template_slug), req.params.key)),
  );

  app.get(`${one}/domains`, { schema: s.listTemplateDomains, config: read }, async (req) => ok(await domains.list(accessOf(req), templateRef(req.params.template_slug))));
  app.post(`${one}/domains`, { schema: s.addTemplateDomain, config: operate }, async (req, reply) =>
    reply.code(201).send(ok(await domains.add(accessOf(req), templateRef(req.params.template_slug), req.body))),
  );
  app.delete(`${one}/domains/:domain_id`, { schema: s.removeTemplateDomain, config: operate }, async (req) =>
    ok(await domains.remove(accessOf(req), templateRef(req.params.template_slug), req.params.domain_id)),
  );

  app.get(`${one}/deployments`, { schema: s.listTemplateDeployments, config: read }, async (req) =>
    ok(await deployments.list(accessOf(req), templateRef(req.params.template_slug), req.query.page, req.query.limit)),
  );
  app.get(`${one}/deployments/:id`, { schema: s.getTemplateDeployment, config: read }, async (req) =>
    ok(await deployments.get(accessOf(req), templateRef(req.params.template_slug), req.params.id)),
  );
};
