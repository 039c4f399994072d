/**
 * The one registry of error codes. Services throw AppError subclasses; the API's error handler
 * maps the code to an HTTP status and the envelope. Nothing else decides a status.
 */
export const ERROR_STATUS = {
  INVALID: 400,
  UNAUTHORIZED: 401,
  PAYMENT_REQUIRED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  /** well-formed, but more work than the server spends on one request (a log analysis past its budget) */
  UNPROCESSABLE: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  /** a third party Slipway depends on for the request failed (the SMTP server) */
  BAD_GATEWAY: 502,
  UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.headers = headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const invalid = (message: string): AppError => new AppError('INVALID', message);
export const notFound = (what: string): AppError => new AppError('NOT_FOUND', `${what} was not found.`);
export const conflict = (message: string): AppError => new AppError('CONFLICT', message);
export const forbidden = (message = 'Your role does not allow this action.'): AppError =>
  new AppError('FORBIDDEN', message);
export const unauthorized = (message: string): AppError => new AppError('UNAUTHORIZED', message);

/**
 * A write the store refused because it would repeat a unique value (a slug, an e-mail, a host
 * name): 409. The repository that made the write throws it, with the sentence the API shows, so
 * that no service has to recognise a driver's error; a service that knows more may reword it.
 */
export class Duplicate extends AppError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFLICT', message);
    this.name = 'Duplicate';
    if (options !== undefined) this.cause = options.cause;
  }
}
