// Errors as the API reports them: one class per error kind.
//
// Every error body of the API is `{"error": {"kind", "message", "field"?},
// "current"?}`. `CtxError` carries all of it plus the HTTP status and the
// `Retry-After` the server sent; the subclass says the kind, so callers
// catch what they can act on (`if (e instanceof ConflictError) e.current`).

/** The kinds of error the API answers (`ErrorKind` in the document). */
export type ErrorKind =
  | "invalid"
  | "unauthenticated"
  | "not_found"
  | "conflict"
  | "gone"
  | "too_large"
  | "rate_limited"
  | "unavailable"
  | "internal";

export interface CtxErrorInit {
  kind?: ErrorKind;
  status?: number;
  field?: string;
  current?: string;
  retryAfter?: number;
  body?: unknown;
}

/** An error answered by ctx (or by a proxy in front of it). */
export class CtxError extends Error {
  readonly kind: ErrorKind;
  /** The HTTP status; absent for an error found by the client itself. */
  readonly status: number | undefined;
  /** The request field the error is about, when the server names one. */
  readonly field: string | undefined;
  /** For a lost compare-and-swap on a ref: where it points now. */
  readonly current: string | undefined;
  /** Seconds the server asked to wait before retrying. */
  readonly retryAfter: number | undefined;
  /** The parsed error body. */
  readonly body: unknown;

  constructor(message: string, init: CtxErrorInit = {}) {
    const where = init.field ? ` (field ${init.field})` : "";
    const status = init.status !== undefined ? `${init.status} ` : "";
    const kind = init.kind ?? "internal";
    super(`${status}${kind}${where}: ${message}`);
    this.name = new.target.name;
    this.kind = kind;
    this.status = init.status;
    this.field = init.field;
    this.current = init.current;
    this.retryAfter = init.retryAfter;
    this.body = init.body;
  }
}

/** 400: the request was malformed; `field` names the culprit. */
export class InvalidError extends CtxError {}
/** 401: no bearer token, or one the server does not know. */
export class UnauthenticatedError extends CtxError {}
/** 404: no such thing (also for another tenant's data). */
export class NotFoundError extends CtxError {}
/** 409: a ref moved (`current` is where it points now) or a branch ended. */
export class ConflictError extends CtxError {}
/** 410: an evicted delta; the message names the compaction to materialize from. */
export class GoneError extends CtxError {}
/** 413: a body or delta over its limit. */
export class TooLargeError extends CtxError {}
/** 429: slow down; `retryAfter` says for how long. */
export class RateLimitedError extends CtxError {}
/** 503: a store is unavailable; retryable. */
export class UnavailableError extends CtxError {}
/** 500: a bug in the server. */
export class InternalError extends CtxError {}

const BY_KIND: Record<ErrorKind, typeof CtxError> = {
  invalid: InvalidError,
  unauthenticated: UnauthenticatedError,
  not_found: NotFoundError,
  conflict: ConflictError,
  gone: GoneError,
  too_large: TooLargeError,
  rate_limited: RateLimitedError,
  unavailable: UnavailableError,
  internal: InternalError,
};

/** The kind a status stands for, for bodies that are not ctx's (a proxy's 502). */
export function kindOfStatus(status: number): ErrorKind {
  if ([400, 405, 415, 422].includes(status)) return "invalid";
  if (status === 401 || status === 403) return "unauthenticated";
  if (status === 404) return "not_found";
  if (status === 409 || status === 412) return "conflict";
  if (status === 410) return "gone";
  if (status === 413) return "too_large";
  if (status === 429) return "rate_limited";
  if (status >= 502 && status <= 504) return "unavailable";
  return "internal";
}

function isKind(kind: unknown): kind is ErrorKind {
  return typeof kind === "string" && kind in BY_KIND;
}

/**
 * The exception an error response stands for: the kind from the body when
 * it is ctx's error body, else from the status.
 */
export function errorFromResponse(status: number, body: Uint8Array, retryAfter?: number): CtxError {
  const text = new TextDecoder().decode(body);
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const detail = typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>).error : undefined;
  if (typeof detail === "object" && detail !== null && isKind((detail as Record<string, unknown>).kind)) {
    const d = detail as Record<string, unknown>;
    const kind = d.kind as ErrorKind;
    const current = (parsed as Record<string, unknown>).current;
    return new BY_KIND[kind](typeof d.message === "string" ? d.message : "", {
      kind,
      status,
      field: typeof d.field === "string" ? d.field : undefined,
      current: typeof current === "string" ? current : undefined,
      retryAfter,
      body: parsed,
    });
  }
  const kind = kindOfStatus(status);
  return new BY_KIND[kind](text.slice(0, 500) || `HTTP ${status}`, { kind, status, retryAfter, body: parsed });
}
