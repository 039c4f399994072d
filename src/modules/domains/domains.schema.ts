import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, ProjectParams, Timestamp } from '../../http/schemas.js';

export const Domain = Type.Object(
  {
    id: Type.String(),
    domain: Type.String({ description: 'The host name, lowercase.' }),
    verified: Type.Boolean({
      description:
        'true once ownership of the name is proven (its TXT record, the name resolving to this installation, or an operator ' +
        'who trusts every domain); only verified domains are routed and get certificates.',
    }),
    verification: Type.Union(
      [
        Type.Object(
          {
            type: Type.Literal('TXT'),
            name: Type.String({ description: '`_slipway-challenge.<domain>`', example: '_slipway-challenge.shop.example.com' }),
            value: Type.String({ description: '`slipway-verify=<token>`' }),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'While unverified: the DNS record that proves ownership (publish it, then POST …/verify). null once verified.' },
    ),
    verified_at: Type.Union([Timestamp, Type.Null()]),
    created_at: Timestamp,
  },
  { additionalProperties: false },
);
export type Domain = Static<typeof Domain>;

const DomainParams = Type.Object({ slug: Type.String(), project_slug: Type.String(), domain_id: Type.String() });
const tags = ['Domains'];

export const listDomains = {
  operationId: 'listDomains',
  tags,
  summary: 'List the custom domains of a project',
  params: ProjectParams,
  response: { 200: Envelope(Type.Array(Domain)), ...authErrors },
};

export const addDomain = {
  operationId: 'addDomain',
  tags,
  summary: 'Add a custom domain to a project; it is routed once verified, and a verified name is unique across the platform',
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
  response: { 201: Envelope(Domain), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const verifyDomain = {
  operationId: 'verifyDomain',
  tags,
  summary: 'Check the DNS proof of a pending custom domain now; answers the domain, verified or still pending',
  params: DomainParams,
  response: { 200: Envelope(Domain), ...authErrors, 409: ErrorEnvelope },
};

export const removeDomain = {
  operationId: 'removeDomain',
  tags,
  summary: 'Remove a custom domain from a project',
  params: DomainParams,
  response: { 200: Envelope(Domain), ...authErrors },
};
