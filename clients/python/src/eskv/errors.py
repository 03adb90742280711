"""Typed exceptions of the eskv API, one class per error ``code``.

Every error answer of the API is ``{"error": {"code", "message", "field"?, ...}}``
(docs/api.md, "Errors"); :func:`error_from_answer` turns one into the
subclass of :class:`EskvError` its code names. A request that got no HTTP
answer at all is a :class:`TransportError`; a call the retry policy gave up
on is an :class:`EscalationError` carrying the last error.
"""

from __future__ import annotations

import json
from typing import Any, Mapping


class EskvError(Exception):
    """Base of every error of the client.

    Attributes:
        code: the API's stable error code (``not_found``, ``version_conflict``...),
            ``transport`` for a request without an answer.
        status: the HTTP status (0 without an answer).
        field: the member or parameter at fault, when the server names one.
        message: the server's message.
        current_version: the key's current version (conflicts, out_of_range...).
        current_value: the key's current value, told only to a reader.
        current_expires_at: when the current lock or entry ends (lock_held).
        correlation_id: the id of the refusal's ``kv.conflicts`` record.
        request_id: the requestId to retry an ``outcome_unknown`` write with.
        failed_op: the index of a transaction's failing op.
        retry_after: seconds the server asked to wait before a retry (0: none).
    """

    code: str = "error"

    def __init__(self, message: str = "", *, code: str | None = None, status: int = 0,
                 detail: Mapping[str, Any] | None = None, retry_after: float = 0.0) -> None:
        super().__init__(message)
        d = dict(detail or {})
        if code is not None:
            self.code = code
        self.status = status
        self.message = message
        self.field: str | None = d.get("field") or None
        self.current_version: int | None = d.get("currentVersion")
        self.current_value: Any = d.get("currentValue")
        self.current_expires_at: str | None = d.get("currentExpiresAt")
        self.correlation_id: str | None = d.get("correlationId")
        self.request_id: str | None = d.get("requestId")
        self.failed_op: int | None = d.get("failedOp")
        ra = d.get("retryAfterSeconds") or 0
        self.retry_after: float = float(ra) if ra else float(retry_after)
        self.detail: dict[str, Any] = d

    def __str__(self) -> str:
        parts = [f"{self.code}"]
        if self.status:
            parts.append(f"({self.status})")
        if self.field:
            parts.append(f"[{self.field}]")
        return " ".join(parts) + (f": {self.message}" if self.message else "")


class Invalid(EskvError, ValueError):
    """400 ``invalid``: bad key, body or parameter; ``field`` names it."""
    code = "invalid"


class Unauthenticated(EskvError):
    """401: no, malformed, unknown or expired bearer token."""
    code = "unauthenticated"


class Forbidden(EskvError):
    """403: the key or prefix is outside the token's grants."""
    code = "forbidden"


class NotFound(EskvError, KeyError):
    """404 ``not_found``: the key does not exist (never written, deleted, expired)."""
    code = "not_found"

    def __str__(self) -> str:  # KeyError would quote the message
        return EskvError.__str__(self)


class VersionConflict(EskvError):
    """409 ``version_conflict``: a compare-and-swap mismatch (``current_version``,
    ``current_value`` to readers, ``correlation_id``), or with ``field ==
    "requestId"`` a request id reused with another body or a stale retry."""
    code = "version_conflict"


class LockHeld(EskvError):
    """409 ``lock_held``: another holder has the lock."""
    code = "lock_held"


class NotLeader(EskvError):
    """409 ``not_leader``: another member leads the pool, or heartbeat/resign
    by a non-leader."""
    code = "not_leader"


class NotLockHolder(EskvError):
    """409 ``not_lock_holder``: extend or release by someone who does not
    hold the lock (or of a free one)."""
    code = "not_lock_holder"


class FieldMismatch(EskvError):
    """409 ``field_mismatch``: a patch's ``if`` field holds another value."""
    code = "field_mismatch"


class WrongType(EskvError, TypeError):
    """409 ``wrong_type``: the operation does not fit the key's value."""
    code = "wrong_type"


class QueueEmpty(EskvError):
    """404 ``queue_empty``: qpop of an empty or missing queue."""
    code = "queue_empty"


class StaleReceipt(EskvError):
    """409 ``stale_receipt``: qack of a receipt that is not the item's
    current delivery."""
    code = "stale_receipt"


class OutOfRange(EskvError):
    """409 ``out_of_range``: an increment would leave its bounds (``field``
    ``by``, ``min`` or ``max``)."""
    code = "out_of_range"


class TooManyKeys(EskvError):
    """409 ``too_many_keys``: a range delete over 1000 keys without ``chunked``."""
    code = "too_many_keys"


class ValueTooLarge(EskvError, ValueError):
    """413 ``value_too_large``: the value (or a transaction) is over the limit."""
    code = "value_too_large"


class CursorExpired(EskvError):
    """410 ``cursor_expired``: the log or history no longer holds the position."""
    code = "cursor_expired"


class SnapshotExpired(EskvError):
    """410 ``snapshot_expired``: a later page needs history that retention
    removed: list again from the first page."""
    code = "snapshot_expired"


class TooManyRequests(EskvError):
    """429 ``too_many_requests``: the principal's share is full; see ``retry_after``."""
    code = "too_many_requests"


class PartitionUnavailable(EskvError):
    """503 ``partition_unavailable``: nothing was written; retry after ``retry_after``."""
    code = "partition_unavailable"


class OutcomeUnknown(EskvError):
    """503 ``outcome_unknown``: the write may have been applied; retry it with
    ``request_id``."""
    code = "outcome_unknown"


class ForwardLoop(EskvError):
    """503 ``forward_loop``: a misconfigured writer; another one may answer a retry."""
    code = "forward_loop"


class TooManyWatches(EskvError):
    """503 ``too_many_watches``: the writer serves as many watches as it may."""
    code = "too_many_watches"


class SlowConsumer(EskvError):
    """A watch ended by the server because its client fell behind."""
    code = "slow_consumer"


class MethodNotAllowed(EskvError):
    """405 ``method_not_allowed``."""
    code = "method_not_allowed"


class UnsupportedMediaType(EskvError):
    """415 ``unsupported_media_type``."""
    code = "unsupported_media_type"


class Internal(EskvError):
    """500 ``internal``, or an error answer that is not eskv's."""
    code = "internal"


class TransportError(EskvError, ConnectionError):
    """No HTTP answer: refused, reset, closed, timed out. A write that failed
    so may or may not have been applied (retried with its request id)."""
    code = "transport"


class UntrustedCertificate(TransportError):
    """The server's certificate is not trusted (``ca_file``): never retried."""
    code = "untrusted_certificate"


class EscalationError(EskvError):
    """The retry policy gave up: ``attempts`` tries were made; ``last`` (also
    ``__cause__``) is the last try's error, whose code and status it copies."""

    def __init__(self, attempts: int, last: EskvError) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last}", code=last.code,
                         status=last.status, detail=last.detail, retry_after=last.retry_after)
        self.attempts = attempts
        self.last = last
        self.__cause__ = last


class LeaseLost(EskvError):
    """A kept lock or leadership was lost: the server refused a renewal, the
    token changed, or no renewal got through before the lease ended."""
    code = "lease_lost"


_BY_CODE: dict[str, type[EskvError]] = {c.code: c for c in (
    Invalid, Unauthenticated, Forbidden, NotFound, VersionConflict, LockHeld, NotLeader,
    NotLockHolder, FieldMismatch, WrongType, QueueEmpty, StaleReceipt, OutOfRange, TooManyKeys,
    ValueTooLarge, CursorExpired, SnapshotExpired, TooManyRequests, PartitionUnavailable,
    OutcomeUnknown, ForwardLoop, TooManyWatches, SlowConsumer, MethodNotAllowed,
    UnsupportedMediaType, Internal)}

# Statuses whose answers, when not eskv's JSON, are a proxy's "not now".
_PROXY_TRANSIENT = {429, 502, 503, 504}


def error_class(code: str) -> type[EskvError]:
    """The exception class of an API error code (EskvError for unknown codes)."""
    return _BY_CODE.get(code, EskvError)


def parse_retry_after(value: str | None) -> float:
    """Seconds of a ``Retry-After`` header (delta-seconds form; 0 otherwise)."""
    if not value:
        return 0.0
    try:
        n = float(value.strip())
    except ValueError:
        return 0.0
    return n if n > 0 else 0.0


def error_from_detail(detail: Mapping[str, Any], status: int = 0, retry_after: float = 0.0) -> EskvError:
    """The typed error an API error object (``{"code","message",...}``) describes."""
    code = str(detail.get("code") or "internal")
    cls = error_class(code)
    return cls(str(detail.get("message") or ""), code=code, status=status, detail=detail,
               retry_after=retry_after)


def error_from_answer(status: int, headers: Mapping[str, str], body: bytes) -> EskvError:
    """The typed error of an error answer. A body that is not eskv's error JSON
    is ``Internal``, or ``PartitionUnavailable`` (transient) for 429, 502, 503, 504."""
    ra = parse_retry_after(_header(headers, "Retry-After"))
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        doc = None
    detail = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(detail, dict) and detail.get("code"):
        return error_from_detail(detail, status, ra)
    snippet = body[:200].decode("utf-8", "replace").strip() or "(empty body)"
    msg = f"unexpected answer {status}, not from eskv's API: {snippet}"
    if status in _PROXY_TRANSIENT:
        return PartitionUnavailable(msg, status=status, retry_after=ra)
    return Internal(msg, status=status)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value whatever the case of its name."""
    low = name.lower()
    for k, v in headers.items():
        if k.lower() == low:
            return v
    return None
