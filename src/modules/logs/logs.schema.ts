import type { Readable } from 'node:stream';
import { Type, type Static } from 'typebox';
import { LOG_STREAMS } from '../../domain/logs.js';
import { MAX_LIMIT, MAX_Q } from '../../store/logs/log-query.js';
import { authErrors, Envelope, Nullable, ProjectParams, QueryInteger, StringEnum, Timestamp } from '../../http/schemas.js';

const tags = ['Logs'];

export const LogEntry = Type.Object(
  {
    id: Type.Integer({ description: 'Grows per project in the order lines were stored.' }),
    timestamp: Timestamp,
    deployment_id: Type.String(),
    pod: Type.String({ description: 'The container (replica) that wrote the line.' }),
    stream: StringEnum(LOG_STREAMS),
    message: Type.String(),
    level: Nullable(Type.String()),
  },
  { additionalProperties: false },
);
export type LogEntry = Static<typeof LogEntry>;

export const LogPage = Type.Object(
  { entries: Type.Array(LogEntry), next_cursor: Nullable(Type.String({ description: 'For the next page in the same direction; null when nothing follows yet.' })) },
  { additionalProperties: false },
);
export type LogPage = Static<typeof LogPage>;

export const LogUsage = Type.Object(
  {
    bytes: Type.Integer({ description: 'UTF-8 bytes of the stored messages.' }),
    lines: Type.Integer(),
    oldest: Nullable(Timestamp),
    newest: Nullable(Timestamp),
    retention_days: Type.Integer({ description: 'The workspace setting log_retention_days.' }),
    dropped_lines: Type.Integer({ description: 'Lines that could not be kept while collection was overloaded.' }),
  },
  { additionalProperties: false },
);
export type LogUsage = Static<typeof LogUsage>;

/** Written as RFC 3339 or Unix ms: the service parses them (each refusal names its parameter). */
const Time = (description: string) => Type.String({ minLength: 1, maxLength: 40, description: `${description}: RFC 3339, or Unix milliseconds.` });

/** The filters GET …/logs and …/logs/download share. */
const filters = {
  direction: Type.Optional(StringEnum(['asc', 'desc'] as const)),
  start: Type.Optional(Time('Inclusive')),
  end: Type.Optional(Time('Exclusive, later than start')),
  deployment_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Lines of this deployment only (none when it is not one of the project).' })),
  stream: Type.Optional(StringEnum(LOG_STREAMS)),
  q: Type.Optional(Type.String({ maxLength: MAX_Q, description: 'A substring of the message, case-insensitive; empty: no filter.' })),
};

export const queryLogs = {
  operationId: 'queryProjectLogs',
  tags,
  summary: 'Query the project\'s logs, one page at a time (newest first by default)',
  params: ProjectParams,
  querystring: Type.Object(
    {
      limit: QueryInteger({ minimum: 1, maximum: MAX_LIMIT, default: 100 }),
      ...filters,
      cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'The next_cursor of the previous page, with the same direction and filters.' })),
    },
    { additionalProperties: false },
  ),
  response: {
    200: Envelope(LogPage),
    ...authErrors,
  },
};

export const downloadLogs = {
  operationId: 'downloadProjectLogs',
  tags,
  summary: 'Download the project\'s logs as gzip-compressed NDJSON (oldest first by default)',
  params: ProjectParams,
  querystring: Type.Object(filters, { additionalProperties: false }),
  response: {
    200: {
      description: 'One log entry per line, as in GET …/logs, gzip-compressed; streamed.',
      // typed as the stream the route sends; Fastify sends a stream as it is, without serializing
      content: { 'application/gzip': { schema: Type.Unsafe<Readable>({ type: 'string', format: 'binary' }) } },
    },
    ...authErrors,
  },
};

export const logUsage = {
  operationId: 'getProjectLogUsage',
  tags,
  summary: 'Log storage of the project',
  params: ProjectParams,
  response: {
    200: Envelope(LogUsage),
    ...authErrors,
  },
};

export const queryDatabaseLogs = {
  ...queryLogs,
  operationId: 'queryDatabaseLogs',
  summary: 'Query what a managed database\'s server printed, one page at a time (newest first by default)',
  params: Type.Object({ slug: Type.String(), db_slug: Type.String() }),
};
