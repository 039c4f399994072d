import { Type, type Static } from 'typebox';
import { UPTIME_STATUSES } from '../../domain/uptime.js';
import { authErrors, bodyErrors, Email, Envelope, Nullable, PageQuery, ProjectParams, StringEnum, Timestamp } from '../../http/schemas.js';


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
export type UptimeMonitor = Static<typeof UptimeMonitor>;

const tags = ['Uptime'];

export const getUptime = {
  operationId: 'getUptimeMonitor',
  tags,
  summary: 'Get the uptime monitor of a project (defaults until it is first set)',
  params: ProjectParams,
  response: { 200: Envelope(UptimeMonitor), ...authErrors },
};

export const updateUptime = {
  operationId: 'updateUptimeMonitor',
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
  response: { 200: Envelope(UptimeMonitor), ...authErrors, ...bodyErrors },
};

const Num = Nullable(Type.Number());

export const UptimeHistory = Type.Object(
  {
    period: StringEnum(['24h', '7d', '30d'] as const),
    from: Timestamp,
    to: Timestamp,
    checks: Type.Integer(),
    failures: Type.Integer(),
    availability: Nullable(Type.Number({ description: 'Percent of successful checks; null without checks.' })),
    response_ms: Type.Object({ avg: Num, p50: Num, p95: Num, p99: Num }, { additionalProperties: false, description: 'Of successful checks: exact over 24 h; over 7 and 30 days the upper bound of a histogram bucket.' }),
    series: Type.Array(Type.Object({ start: Timestamp, checks: Type.Integer(), failures: Type.Integer(), availability: Num, avg_ms: Num }, { additionalProperties: false }), { description: 'Hourly (24h, 7d) or daily (30d).' }),
    incidents: Type.Array(Type.Object({ id: Type.String(), started_at: Timestamp, ended_at: Nullable(Timestamp), duration_sec: Type.Integer(), cause: Type.String() }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type UptimeHistory = Static<typeof UptimeHistory>;

export const uptimeHistory = {
  operationId: 'getUptimeHistory',
  tags,
  summary: 'Availability, response-time percentiles, a series and the incidents of the last 24 hours, 7 or 30 days',
  params: ProjectParams,
  querystring: Type.Object({ period: Type.Optional(StringEnum(['24h', '7d', '30d'] as const, { default: '24h' })) }, { additionalProperties: false }),
  response: {
    200: Envelope(UptimeHistory),
    ...authErrors,
  },
};

const Delivery = Type.Object(
  { ok: Type.Boolean(), attempts: Type.Integer(), status: Nullable(Type.Integer({ description: "The webhook's HTTP answer." })), error: Nullable(Type.String()) },
  { additionalProperties: false },
);

export const UptimeNotification = Type.Object(
  {
    id: Type.String(),
    event: Type.String({ description: 'down, up or test' }),
    channel: Type.String({ description: 'webhook or email' }),
    status: Type.String({ description: 'pending, sending (a test in progress), sent or failed' }),
    attempts: Type.Integer(),
    response_status: Nullable(Type.Integer()),
    error: Nullable(Type.String()),
    created_at: Timestamp,
    sent_at: Nullable(Timestamp),
  },
  { additionalProperties: false },
);
export type UptimeNotification = Static<typeof UptimeNotification>;

export const UptimeNotificationPage = Type.Object(
  { notifications: Type.Array(UptimeNotification), total: Type.Integer(), page: Type.Integer(), limit: Type.Integer() },
  { additionalProperties: false },
);
export type UptimeNotificationPage = Static<typeof UptimeNotificationPage>;

/** What POST …/uptime/test answers: each channel's delivery, or null where none is set. */
export const UptimeTestResult = Type.Object({ webhook: Nullable(Delivery), email: Nullable(Delivery) }, { additionalProperties: false });
export type UptimeTestResult = Static<typeof UptimeTestResult>;

export const uptimeNotifications = {
  operationId: 'listUptimeNotifications',
  tags,
  summary: 'The delivery log of the monitor\'s notifications, newest first',
  params: ProjectParams,
  querystring: PageQuery,
  response: {
    200: Envelope(UptimeNotificationPage),
    ...authErrors,
  },
};

export const uptimeTest = {
  operationId: 'sendUptimeTestNotification',
  tags,
  summary: 'Send a test notification to the chat webhook and the e-mail address now, and answer what each returned',
  params: ProjectParams,
  response: { 200: Envelope(UptimeTestResult), ...authErrors },
};
