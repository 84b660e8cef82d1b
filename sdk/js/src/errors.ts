/** Errors of the Paddock SDK. Every failed API call throws a PaddockError (or a subclass
 * chosen by the server's error code), carrying the server's code, HTTP status and message. */

export class PaddockError extends Error {
  /** The API's error code (`not_found`, `conflict`, ...), or `connection_failed` when the
   * daemon could not be reached, `protocol` when its answer made no sense. */
  readonly code: string;
  /** The HTTP status, 0 when there was no answer. */
  readonly status: number;

  constructor(code: string, status: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** 400 invalid_argument: a bad or unknown field, malformed request. */
export class InvalidArgument extends PaddockError {}
/** 401 unauthorized: no token, or a token the daemon does not know. */
export class Unauthorized extends PaddockError {}
/** 403 forbidden: not allowed (a token may not do this, a sandbox writing outside /tmp). */
export class Forbidden extends PaddockError {}
/** 403 quota_exceeded: a token's quota (environments, CPUs, memory, disk) is used up. */
export class QuotaExceeded extends PaddockError {}
/** 404 not_found: no such environment, process, snapshot, file, image or route. */
export class NotFound extends PaddockError {}
/** 409 conflict: the name exists, or the environment is in the wrong state. */
export class Conflict extends PaddockError {}

/** 429 rate_limited: too many requests; retry after `retryAfter` seconds. */
export class RateLimited extends PaddockError {
  readonly retryAfter: number | null;
  constructor(code: string, status: number, message: string, retryAfter: number | null) {
    super(code, status, message);
    this.retryAfter = retryAfter;
  }
}

/** A command ran past its timeout and was killed; `result` holds what it wrote until then. */
export class CommandTimeout extends PaddockError {
  readonly result: unknown;
  constructor(message: string, result: unknown) {
    super("command_timeout", 200, message);
    this.result = result;
  }
}

const byCode: Record<string, new (code: string, status: number, message: string) => PaddockError> = {
  invalid_argument: InvalidArgument,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  quota_exceeded: QuotaExceeded,
  not_found: NotFound,
  conflict: Conflict,
};

/** The error for an API error answer: body is the raw response body. */
export function errorFromResponse(status: number, body: Buffer | string,
                                  retryAfterHeader?: string | string[]): PaddockError {
  let code = "";
  let message = "";
  try {
    const j = JSON.parse(body.toString());
    if (j && typeof j === "object" && j.error && typeof j.error === "object") {
      code = String(j.error.code ?? "");
      message = String(j.error.message ?? "");
    }
  } catch {
    /* not JSON: use the status */
  }
  if (!code) {
    code = status === 401 ? "unauthorized" : status === 404 ? "not_found" : status === 429 ? "rate_limited" : "http_" + status;
    message = body.toString().trim().slice(0, 300) || "HTTP " + status;
  }
  if (code === "rate_limited") {
    const h = Array.isArray(retryAfterHeader) ? retryAfterHeader[0] : retryAfterHeader;
    const n = h !== undefined && /^\d+$/.test(h.trim()) ? Number(h.trim()) : null;
    return new RateLimited(code, status, message, n);
  }
  const Cls = byCode[code] ?? PaddockError;
  return new Cls(code, status, message);
}
