import { Type } from 'typebox';
import { authErrors, Envelope, ErrorEnvelope, ProjectParams, Timestamp } from '../../schemas.js';

export const Domain = Type.Object(
  {
    id: Type.String(),
    domain: Type.String({ description: 'The host name, lowercase.' }),
    verified: Type.Boolean({ description: 'false until the domain has been verified (ACME).' }),
    created_at: Timestamp,
  },
  { additionalProperties: false },
);

const DomainParams = Type.Object({ slug: Type.String(), project_slug: Type.String(), domain_id: Type.String() });
const tags = ['Domains'];

export const listDomains = {
  tags,
  summary: 'List the custom domains of a project',
  params: ProjectParams,
  response: { 200: Envelope(Type.Array(Domain)), ...authErrors },
};

export const addDomain = {
  tags,
  summary: 'Add a custom domain to a project; a host name is unique across the platform',
  params: ProjectParams,
  body: Type.Object(
    {
      domain: Type.String({
        minLength: 1,
        maxLength: 253,
        description:
          'An RFC 1123 host name such as shop.example.com, lowercased on input: at least two labels, ' +
          'no scheme, port, path, trailing dot, IP address or wildcard, and not under the apps domain.',
        example: 'shop.example.com',
      }),
    },
    { additionalProperties: false },
  ),
  response: { 201: Envelope(Domain), ...authErrors, 409: ErrorEnvelope },
};

export const removeDomain = {
  tags,
  summary: 'Remove a custom domain from a project',
  params: DomainParams,
  response: { 200: Envelope(Domain), ...authErrors },
};
