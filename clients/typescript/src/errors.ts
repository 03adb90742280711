// Errors of the eskv client: EskvError (the server's answer, one subclass
// per error code of docs/api.md "Errors"), NetworkError (no answer at all),
// EscalationError (the retry policy gave up) and the lease errors.

import type { components } from "./schema.js";

/** The error codes of the API (schemas/openapi.yaml ErrorCode), and a watch's slow_consumer. */
export type ErrorCode = components["schemas"]["ErrorCode"] | "slow_consumer";

/** The body of an error answer: `{"error": {...}}`'s detail. */
export type ErrorDetail = components["schemas"]["ErrorDetail"];

/** Options of an EskvError beyond its detail. */
export interface EskvErrorInit {
  /** The key the call addressed, when one. */
  key?: string;
  /** True when the answer was not eskv's error JSON (a proxy's page). */
  unexpected?: boolean;
  /** Retry-After of the answer, in seconds, when the body gave none. */
  retryAfterSeconds?: number;
}

/**
 * An error answer of the API. `code` is the stable machine-readable code,
 * `status` the HTTP status (0 for the error event that ends a watch),
 * `field` the request member at fault. The current* members carry the
 * key's state on conflicts (currentValue only for a reader).
 */
export class EskvError extends Error {
  /** The error code, e.g. "version_conflict". */
  readonly code: ErrorCode | (string & {});
  /** The HTTP status of the answer; 0 for a watch's error event. */
  readonly status: number;
  /** The request member at fault, e.g. "ops[2].condition.version". */
  readonly field?: string;
  /** The key's current version (conflicts, out_of_range). */
  readonly currentVersion?: number;
  /** The key's current value, to a principal that may read it. */
  readonly currentValue?: unknown;
  /** The end of the current lease (lock_held, not_leader). */
  readonly currentExpiresAt?: string;
  /** The conflict's id in the writer's log and kv.conflicts. */
  readonly correlationId?: string;
  /** How long the server asks to wait before a retry, in seconds. */
  readonly retryAfterSeconds?: number;
  /** The requestId to retry an outcome_unknown write with. */
  readonly requestId?: string;
  /** The index of a transaction's failing op. */
  readonly failedOp?: number;
  /** The key the call addressed, when one. */
  readonly key?: string;
  /** True when the answer was not eskv's error JSON. */
  readonly unexpected: boolean;

  constructor(status: number, detail: ErrorDetail | { code: string; message: string; field?: string; retryAfterSeconds?: number }, init: EskvErrorInit = {}) {
    super(detail.message || detail.code);
    const d = detail as Partial<ErrorDetail>;
    this.name = new.target.name;
    this.code = detail.code;
    this.status = status;
    this.field = d.field;
    this.currentVersion = d.currentVersion;
    this.currentValue = d.currentValue;
    this.currentExpiresAt = d.currentExpiresAt;
    this.correlationId = d.correlationId;
    this.retryAfterSeconds = d.retryAfterSeconds || init.retryAfterSeconds || undefined;
    this.requestId = d.requestId;
    this.failedOp = d.failedOp;
    this.key = init.key;
    this.unexpected = init.unexpected ?? false;
  }
}

/** 400 invalid: bad input; field names the culprit. */
export class InvalidError extends EskvError {}
/** 401 unauthenticated: no, unknown or expired token. */
export class UnauthenticatedError extends EskvError {}
/** 403 forbidden: outside the token's grants. */
export class ForbiddenError extends EskvError {}
/** 404 not_found: the key does not exist. */
export class NotFoundError extends EskvError {}
/** 409 version_conflict: a compare-and-swap that did not match (currentVersion), or a requestId reused (field "requestId"). */
export class VersionConflictError extends EskvError {}
/** 409 lock_held: another holder has the lock. */
export class LockHeldError extends EskvError {}
/** 409 not_lock_holder: extend or release by a non-holder. */
export class NotLockHolderError extends EskvError {}
/** 409 not_leader: another leader, or heartbeat/resign by a non-leader. */
export class NotLeaderError extends EskvError {}
/** 409 wrong_type: the operation does not fit the value. */
export class WrongTypeError extends EskvError {}
/** 409 field_mismatch: a patch's or condition's field holds another value. */
export class FieldMismatchError extends EskvError {}
/** 409 out_of_range: an increment would leave its bounds. */
export class OutOfRangeError extends EskvError {}
/** 404 queue_empty: nothing to pop. */
export class QueueEmptyError extends EskvError {}
/** 409 stale_receipt: the receipt is not the item's current delivery. */
export class StaleReceiptError extends EskvError {}
/** 413 value_too_large. */
export class ValueTooLargeError extends EskvError {}
/** 409 too_many_keys: a range delete over the limit. */
export class TooManyKeysError extends EskvError {}
/** 503 partition_unavailable (also a proxy's 429/502/503/504): transient. */
export class PartitionUnavailableError extends EskvError {}
/** 503 outcome_unknown: the write may have been applied; retry with its requestId. */
export class OutcomeUnknownError extends EskvError {}
/** 503 forward_loop: a misconfigured writer; another may answer. */
export class ForwardLoopError extends EskvError {}
/** 503 too_many_watches. */
export class TooManyWatchesError extends EskvError {}
/** 429 too_many_requests: Retry-After says when. */
export class TooManyRequestsError extends EskvError {}
/** 410 cursor_expired: the log no longer holds what follows a watch's cursor. */
export class CursorExpiredError extends EskvError {}
/** 410 snapshot_expired: a later listing page's snapshot is gone. */
export class SnapshotExpiredError extends EskvError {}
/** slow_consumer: a watch that fell behind was ended (it resumes by itself). */
export class SlowConsumerError extends EskvError {}
/** 500 internal, and answers that are not eskv's. */
export class InternalError extends EskvError {}

type ErrorClass = new (status: number, detail: ErrorDetail | { code: string; message: string }, init?: EskvErrorInit) => EskvError;

const classes: Record<string, ErrorClass> = {
  invalid: InvalidError,
  unauthenticated: UnauthenticatedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  version_conflict: VersionConflictError,
  lock_held: LockHeldError,
  not_lock_holder: NotLockHolderError,
  not_leader: NotLeaderError,
  wrong_type: WrongTypeError,
  field_mismatch: FieldMismatchError,
  out_of_range: OutOfRangeError,
  queue_empty: QueueEmptyError,
  stale_receipt: StaleReceiptError,
  value_too_large: ValueTooLargeError,
  too_many_keys: TooManyKeysError,
  partition_unavailable: PartitionUnavailableError,
  outcome_unknown: OutcomeUnknownError,
  forward_loop: ForwardLoopError,
  too_many_watches: TooManyWatchesError,
  too_many_requests: TooManyRequestsError,
  cursor_expired: CursorExpiredError,
  snapshot_expired: SnapshotExpiredError,
  slow_consumer: SlowConsumerError,
  internal: InternalError,
};

/** makeError builds the EskvError subclass of detail.code (EskvError itself for a code this client does not know). */
export function makeError(status: number, detail: { code: string; message: string }, init?: EskvErrorInit): EskvError {
  const C = classes[detail.code] ?? EskvError;
  return new C(status, detail, init);
}

/** A request that got no HTTP answer: unreachable, connection broken, or the attempt's timeout. A write that failed so may have been applied. */
export class NetworkError extends Error {
  /** The request's method. */
  readonly method: string;
  /** The request's URL. */
  readonly url: string;
  constructor(method: string, url: string, cause: unknown) {
    super(`${method} ${url}: ${describe(cause)}`, { cause });
    this.name = "NetworkError";
    this.method = method;
    this.url = url;
  }
}

/** The retry policy gave up: `attempts` tries were made; `cause` is the last one's error. */
export class EscalationError extends Error {
  /** The tries made, the first included. */
  readonly attempts: number;
  constructor(attempts: number, cause: unknown) {
    super(`gave up after ${attempts} attempts: ${describe(cause)}`, { cause });
    this.name = "EscalationError";
    this.attempts = attempts;
  }
}

/** A kept lock's lease was lost: the server refused a renewal, or none got through before the lease's end less the margin (unconfirmed). */
export class LeaseLostError extends Error {
  /** The lock's key. */
  readonly key: string;
  /** The tenure's fencing token. */
  readonly token: number;
  /** True when no renewal got through in time: the server may still count the holder until the lease ends. */
  readonly unconfirmed: boolean;
  constructor(key: string, token: number, cause: unknown, unconfirmed: boolean) {
    super(`lease of ${key} (token ${token}) lost: ${unconfirmed ? "no renewal got through before it ended" : describe(cause)}`, { cause });
    this.name = "LeaseLostError";
    this.key = key;
    this.token = token;
    this.unconfirmed = unconfirmed;
  }
}

/** A kept lock's end after release(). */
export class LeaseReleasedError extends Error {
  constructor(key: string) {
    super(`lease of ${key} released`);
    this.name = "LeaseReleasedError";
  }
}

/** The update's write may have been applied: a try got no answer and its retry met a conflict. Inside an EscalationError. */
export class OutcomeUnknownUpdateError extends Error {
  constructor(requestId: string, cause: unknown) {
    super(`the update's write ${requestId} may have been applied: ${describe(cause)}`, { cause });
    this.name = "OutcomeUnknownUpdateError";
  }
}

/** errorCode is the API error code of err, looking through EscalationError and causes; undefined when none. */
export function errorCode(err: unknown): string | undefined {
  const e = asEskvError(err);
  return e?.code;
}

/** asEskvError is the EskvError err is or wraps (EscalationError's cause), or undefined. */
export function asEskvError(err: unknown): EskvError | undefined {
  for (let e = err, i = 0; e != null && i < 8; i++) {
    if (e instanceof EskvError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** describe is err's message for wrapping. */
export function describe(err: unknown): string {
  if (err instanceof Error) {
    const c = (err as { cause?: unknown }).cause;
    return c instanceof Error && !err.message.includes(c.message) ? `${err.message}: ${c.message}` : err.message;
  }
  return String(err);
}
