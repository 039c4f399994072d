import { Type } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, ProjectParams, StringEnum } from '../../http/schemas.js';

export const Issue = Type.Object(
  {
    pattern: Type.String({ description: 'The template of the lines this issue groups, variable parts as `<*>`.' }),
    count: Type.Integer({ minimum: 1, description: 'How many lines (or stack traces) it covers.' }),
    severity: StringEnum(['critical', 'error', 'warning'] as const),
    example: Type.String({ description: 'One real line of it.' }),
    hint: Type.String({ description: 'What to do about it, in one sentence.' }),
  },
  { additionalProperties: false },
);

export const Analysis = Type.Object(
  {
    summary: Type.String(),
    issues: Type.Array(Issue, { description: 'Most severe first, then the most frequent.' }),
    analyzer: Type.String({ description: '`builtin`, or `llm:<model>` when the configured model answered.' }),
  },
  { additionalProperties: false },
);

export const analyzeLogs = {
  operationId: 'analyzeProjectLogs',
  tags: ['Logs'],
  summary: 'Groups log lines into templates and names known failures (the text given, or the project\'s last 1,000 lines)',
  params: ProjectParams,
  body: Type.Union([
    Type.Object(
      {
        logs: Type.Optional(Type.String({ description: 'Log text, at most 1 MiB; empty or absent: the project\'s last 1,000 lines.' })),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ]),
  response: { 200: Envelope(Analysis), ...authErrors, ...bodyErrors, 422: ErrorEnvelope, 503: ErrorEnvelope },
};
