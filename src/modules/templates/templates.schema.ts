import { Type, type Static } from 'typebox';
import { PROJECT_STATUSES } from '../../domain/project.js';
import { CatalogViewSchema } from './catalog.js';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, Name, StringEnum, Timestamp } from '../../http/schemas.js';
import { Deployment, listDeployments as projectDeployments } from '../deployments/deployments.schema.js';
import { Domain, addDomain as projectAddDomain } from '../domains/domains.schema.js';
import { EnvKey, EnvValue, EnvVar } from '../env/env.schema.js';
import { sizeFields } from '../projects/projects.schema.js';

export const TemplateParams = Type.Object({ slug: Type.String(), template_slug: Type.String() });
const TemplateDeploymentParams = Type.Object({ slug: Type.String(), template_slug: Type.String(), id: Type.String() });
const TemplateDomainParams = Type.Object({ slug: Type.String(), template_slug: Type.String(), domain_id: Type.String() });
const TemplateEnvParams = Type.Object({ slug: Type.String(), template_slug: Type.String(), key: Type.String() });

export const TemplateInstance = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    slug: Type.String({ description: 'From the name; shares the workspace\'s slugs with its projects.' }),
    template_name: Type.String({ description: 'The catalog `key` it was made from.' }),
    status: StringEnum(PROJECT_STATUSES),
    port: Type.Integer(),
    cpu: Type.String(),
    ram: Type.String(),
    replicas: Type.Integer(),
    url: Type.String({ description: 'Where the router serves it.' }),
    default_domain: Type.String(),
    databases: Type.Array(Type.String(), { description: 'The slugs of the databases it provisioned (deleted with it).' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false },
);
export type TemplateInstance = Static<typeof TemplateInstance>;

const tags = ['Templates'];
const paid = { 402: ErrorEnvelope, 409: ErrorEnvelope };

export const availableTemplates = {
  operationId: 'listAvailableTemplates',
  tags,
  summary: 'The template catalog: real self-hosted apps, with their image, port, sizes, required variables and the database they need',
  response: { 200: Envelope(Type.Array(CatalogViewSchema)), 401: ErrorEnvelope, 429: ErrorEnvelope },
};

/** The create response: the instance and its generated values, in full this once. */
export const NewTemplateInstance = Type.Object(
  {
    ...TemplateInstance.properties,
    generated_envs: Type.Record(Type.String(), Type.String(), {
      description: 'The values generated for it (`${password:N}`, `${hex:N}`, `${base64:N}`, `${uuid}`), in full in this response only: they are kept as secret variables, never shown again (an app\'s first admin password is among them).',
    }),
  },
  { additionalProperties: false },
);
export type NewTemplateInstance = Static<typeof NewTemplateInstance>;

export const createTemplate = {
  operationId: 'createTemplate',
  tags,
  summary: 'Make an instance of a catalog entry: a project of kind template with its variables (generated secrets kept as secrets) and the database it needs provisioned',
  params: Type.Object({ slug: Type.String() }),
  body: Type.Object({ name: Name, template_name: Type.String({ minLength: 1, maxLength: 100, description: 'A catalog `key`.' }) }, { additionalProperties: false }),
  response: { 201: Envelope(NewTemplateInstance), ...authErrors, ...bodyErrors, ...paid },
};

export const listTemplates = {
  operationId: 'listTemplates',
  tags,
  summary: 'List the template instances of a workspace',
  params: Type.Object({ slug: Type.String() }),
  response: { 200: Envelope(Type.Array(TemplateInstance)), ...authErrors },
};

export const getTemplate = {
  operationId: 'getTemplate',
  tags,
  summary: 'Get a template instance',
  params: TemplateParams,
  response: { 200: Envelope(TemplateInstance), ...authErrors },
};

export const updateTemplate = {
  operationId: 'updateTemplate',
  tags,
  summary: 'Change an instance\'s name, port, cpu, ram or replicas; a running instance takes a new size at once',
  params: TemplateParams,
  body: Type.Object(
    {
      name: Type.Optional(Name),
      port: Type.Optional(sizeFields.port),
      replicas: Type.Optional(sizeFields.replicas),
      cpu: Type.Optional(sizeFields.cpu),
      ram: Type.Optional(sizeFields.ram),
    },
    { additionalProperties: false, minProperties: 1 },
  ),
  response: { 200: Envelope(TemplateInstance), ...authErrors, ...bodyErrors, 402: ErrorEnvelope, 409: ErrorEnvelope },
};

export const deleteTemplate = {
  operationId: 'deleteTemplate',
  tags,
  summary: 'Delete an instance: its containers, routes, logs, data volumes and the databases it provisioned',
  params: TemplateParams,
  response: { 200: Envelope(TemplateInstance), ...authErrors },
};

export const deployTemplate = {
  operationId: 'deployTemplate',
  tags,
  summary: '`image`: run the catalog image; `build`: build the template\'s source repository; 202 with the queued deployment',
  params: TemplateParams,
  body: Type.Object({ mode: StringEnum(['image', 'build'] as const) }, { additionalProperties: false }),
  response: { 202: Envelope(Deployment), ...authErrors, ...bodyErrors, ...paid },
};

export const stopTemplate = {
  operationId: 'stopTemplate',
  tags,
  summary: 'Stop the instance (its running deployment); answers that deployment, now stopped',
  params: TemplateParams,
  response: { 200: Envelope(Deployment), ...authErrors, 409: ErrorEnvelope },
};

export const redeployTemplate = {
  operationId: 'redeployTemplate',
  tags,
  summary: 'Deploy the current image again, without a build; 202',
  params: TemplateParams,
  response: { 202: Envelope(Deployment), ...authErrors, ...paid },
};

export const rollbackTemplate = {
  operationId: 'rollbackTemplate',
  tags,
  summary: 'Deploy an earlier deployment\'s image again; 202',
  params: TemplateDeploymentParams,
  response: { 202: Envelope(Deployment), ...authErrors, ...paid },
};

export const listTemplateEnv = {
  operationId: 'listTemplateEnvVars',
  tags,
  summary: 'List the variables of an instance; secret values come back as ""',
  params: TemplateParams,
  response: { 200: Envelope(Type.Array(EnvVar)), ...authErrors },
};

export const setTemplateEnv = {
  operationId: 'setTemplateEnvVars',
  tags,
  summary: 'Set variables (created, or their value replaced; an existing one keeps its secrecy unless is_secret is given); answers every variable',
  params: TemplateParams,
  body: Type.Array(Type.Object({ key: EnvKey, value: EnvValue, is_secret: Type.Optional(Type.Boolean()) }, { additionalProperties: false }), { minItems: 1, maxItems: 1000 }),
  response: { 200: Envelope(Type.Array(EnvVar)), ...authErrors, ...bodyErrors },
};

export const deleteTemplateEnv = {
  operationId: 'deleteTemplateEnvVar',
  tags,
  summary: 'Remove the variable named `key`',
  params: TemplateEnvParams,
  response: { 200: Envelope(EnvVar), ...authErrors },
};

export const listTemplateDomains = {
  operationId: 'listTemplateDomains',
  tags,
  summary: 'List the custom domains of an instance',
  params: TemplateParams,
  response: { 200: Envelope(Type.Array(Domain)), ...authErrors },
};

export const addTemplateDomain = {
  operationId: 'addTemplateDomain',
  tags,
  summary: projectAddDomain.summary.replace('a project', 'an instance'),
  params: TemplateParams,
  body: projectAddDomain.body,
  response: projectAddDomain.response,
};

export const removeTemplateDomain = {
  operationId: 'removeTemplateDomain',
  tags,
  summary: 'Remove a custom domain from an instance',
  params: TemplateDomainParams,
  response: { 200: Envelope(Domain), ...authErrors },
};

export const listTemplateDeployments = {
  operationId: 'listTemplateDeployments',
  tags,
  summary: 'List the deployments of an instance, newest first',
  params: TemplateParams,
  querystring: projectDeployments.querystring,
  response: projectDeployments.response,
};

export const getTemplateDeployment = {
  operationId: 'getTemplateDeployment',
  tags,
  summary: 'Get a deployment of an instance',
  params: TemplateDeploymentParams,
  response: { 200: Envelope(Deployment), ...authErrors },
};
