import { Type } from 'typebox';
import { UPTIME_STATUSES } from '../../../domain/uptime.js';
import { authErrors, Email, Envelope, ProjectParams, StringEnum, Timestamp } from '../../schemas.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

export const UptimeMonitor = Type.Object(
  {
    enabled: Type.Boolean(),
    check_interval_sec: Type.Integer({ description: 'Seconds between checks.' }),
    check_path: Type.String(),
    check_url: Type.String({ description: "Read-only: the project's default URL + check_path." }),
    chat_webhook_url: Nullable(Type.String({ description: 'Slack/Discord-compatible incoming webhook; stored encrypted.' })),
    notify_email: Nullable(Type.String()),
    status: StringEnum(UPTIME_STATUSES, { description: 'Read-only.' }),
    last_checked_at: Nullable(Timestamp),
    last_response_ms: Nullable(Type.Integer()),
  },
  { additionalProperties: false },
);

const tags = ['Uptime'];

export const getUptime = {
  tags,
  summary: 'Get the uptime monitor of a project (defaults until it is first set)',
  params: ProjectParams,
  response: { 200: Envelope(UptimeMonitor), ...authErrors },
};

export const updateUptime = {
  tags,
  summary: 'Change the uptime monitor settings of a project; fields not sent are kept',
  params: ProjectParams,
  body: Type.Object(
    {
      enabled: Type.Optional(Type.Boolean()),
      check_interval_sec: Type.Optional(Type.Integer({ minimum: 10, maximum: 86400, description: 'Default 60.' })),
      check_path: Type.Optional(
        Type.String({
          pattern: '^/[\\x21-\\x7E]*$',
          maxLength: 1024,
          description: 'Appended to the default URL; default "/".',
          'x-error': 'must start with "/" and be at most 1024 printable ASCII characters without spaces',
        }),
      ),
      chat_webhook_url: Type.Optional(
        Nullable(
          Type.String({
            maxLength: 2048,
            pattern: '^[Hh][Tt][Tt][Pp][Ss]?://',
            format: 'uri',
            description: 'An http(s) URL, or null to remove it.',
            'x-error': 'must be an http or https URL of at most 2048 characters, or null',
          }),
        ),
      ),
      notify_email: Type.Optional(Nullable(Email)),
    },
    { additionalProperties: false, minProperties: 1 },
  ),
  response: { 200: Envelope(UptimeMonitor), ...authErrors },
};
