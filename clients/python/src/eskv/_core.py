"""The sans-IO core shared by :class:`eskv.Client` and :class:`eskv.AsyncClient`.

Nothing here does I/O: it builds requests, reads answers, maps errors,
decides retries (the Go client's policy) and parses watch streams. The two
clients only move bytes and sleep.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from .errors import (EscalationError, EskvError, ForwardLoop, OutcomeUnknown, PartitionUnavailable,
                     SlowConsumer, TooManyRequests, TooManyWatches, TransportError, UntrustedCertificate, VersionConflict,
                     error_from_answer, error_from_detail, Internal)

T = TypeVar("T")

#: Header telling the write repeated the key's last one (nothing new written).
REPLAYED_HEADER = "eskv-replayed"
#: Header telling the log position a read reflects (``p<partition>.o<offset>``).
POSITION_HEADER = "eskv-position"


@dataclass
class Request:
    """One HTTP request of the API, before any I/O.

    ``retry`` says it is safe to repeat (a read, or a write carrying its
    request id); ``key`` is the key addressed, for error messages.
    """

    method: str
    path: str
    query: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | None = None
    key: str = ""
    retry: bool = True
    accept: str = "application/json"
    #: A blocking wait in seconds (``?wait=``: qpop, lpop, rpop, acquire);
    #: each try asks for what is left of it.
    wait: float = 0.0

    def target(self) -> str:
        """The request target: escaped path and query."""
        if not self.query:
            return self.path
        return self.path + "?" + urllib.parse.urlencode(self.query)


@dataclass
class Response:
    """An HTTP answer: status, headers (names lowercased) and the whole body."""

    status: int
    headers: dict[str, str]
    body: bytes


class Answer(dict):  # type: ignore[type-arg]
    """A JSON object answer (a dict) with the answer's ``headers``, and
    ``replayed`` (header ``Eskv-Replayed: true``) and ``position``
    (``ESKV-Position``) when the server sent them."""

    headers: dict[str, str]

    def __init__(self, doc: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        super().__init__(doc)
        self.headers = dict(headers or {})

    @property
    def replayed(self) -> bool:
        """True when the write repeated the key's last one: nothing new was written."""
        return self.headers.get(REPLAYED_HEADER, "") == "true"

    @property
    def position(self) -> str | None:
        """The log position the read reflects, from the header or the body."""
        return self.headers.get(POSITION_HEADER) or self.get("position")


@dataclass
class Call(Generic[T]):
    """A request and how to read its successful answer."""

    request: Request
    parse: Callable[[Response], T]


def parse_answer(resp: Response) -> Answer:
    """A successful answer's JSON object as an :class:`Answer`."""
    try:
        doc = json.loads(resp.body.decode("utf-8")) if resp.body else {}
    except (UnicodeDecodeError, ValueError) as e:
        raise Internal(f"the answer is not JSON: {e}", status=resp.status) from e
    if not isinstance(doc, dict):
        raise Internal("the answer is not a JSON object", status=resp.status)
    return Answer(doc, resp.headers)


def handle(resp: Response, parse: Callable[[Response], T]) -> T:
    """The parsed answer of a 2xx response, else its typed error (raised)."""
    if 200 <= resp.status < 300:
        return parse(resp)
    raise error_from_answer(resp.status, resp.headers, resp.body)


def request_headers(req: Request, token: str, user_agent: str, directive: str) -> dict[str, str]:
    """The headers of req: token, content type, user agent, directive (on
    writes only)."""
    h = {"Accept": req.accept, "User-Agent": user_agent}
    if req.body is not None:
        h["Content-Type"] = "application/json"
    if token:
        h["Authorization"] = "Bearer " + token
    if directive and req.method != "GET":
        h["Eskv-Directive"] = directive
    return h


def encode(doc: Any) -> bytes:
    """JSON of a body, compact, UTF-8, refusing NaN and infinities."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def key_path(key: str, verb: str = "") -> str:
    """The escaped path of a key's route, ``/v1/kv/<key>[:verb]``; each
    component escaped on its own so slashes stay separators."""
    if not key:
        from .errors import Invalid
        raise Invalid("key is empty", detail={"field": "key"})
    parts = [urllib.parse.quote(p, safe=":@!$&'()*+,;=-._~") for p in key.split("/")]
    return "/v1/kv/" + "/".join(parts) + (":" + verb if verb else "")


def uuid7(now: float | None = None) -> str:
    """A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits."""
    ms = int((time.time() if now is None else now) * 1000)
    b = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    b[6] = 0x70 | (b[6] & 0x0F)
    b[8] = 0x80 | (b[8] & 0x3F)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_request_id() -> str:
    """A request id for a write the caller gave none: reused by every retry."""
    return uuid7()


# --- retry policy -------------------------------------------------------

TRANSIENT, CONFLICT, FATAL = "transient", "conflict", "fatal"


def classify(err: BaseException) -> str:
    """The retry class of an error, as the Go client's ``Classify``:

    - transient: no answer (TransportError), 503 partition_unavailable,
      outcome_unknown, forward_loop, 429 too_many_requests (and a proxy's
      429/502/503/504, mapped to partition_unavailable);
    - conflict: 409 version_conflict on a version (not on ``requestId``);
    - fatal: everything else, an escalation, and a server certificate
      the client does not trust.
    """
    if isinstance(err, (EscalationError, UntrustedCertificate)):
        return FATAL
    if isinstance(err, (TransportError, PartitionUnavailable, OutcomeUnknown, ForwardLoop, TooManyRequests)):
        return TRANSIENT
    if isinstance(err, VersionConflict) and err.field != "requestId":
        return CONFLICT
    return FATAL


class Backoff:
    """A schedule of waits: ``first``, doubling, capped at ``cap``; with
    jitter each is drawn from the upper half of its ceiling (w/2..w).
    ``left`` bounds the waits (negative: no end)."""

    def __init__(self, first: float, cap: float, jitter: bool, left: int,
                 rand: Callable[[float, float], float] = random.uniform) -> None:
        self.next_wait, self.cap, self.jitter, self.left, self._rand = first, cap, jitter, left, rand

    def next(self) -> float | None:
        """The next wait in seconds, or None when the schedule has none left."""
        if self.left == 0:
            return None
        if self.left > 0:
            self.left -= 1
        w = min(self.next_wait, self.cap)
        self.next_wait = min(self.next_wait * 2, self.cap)
        if self.jitter and w > 0:
            w = self._rand(w / 2, w)
        return w


@dataclass
class RetryPolicy:
    """How the clients retry (the Go client's ``RetryPolicy``).

    Reads and writes carrying a request id (the clients give every write
    one, reused by its retries) are tried up to ``attempts`` times in all
    on transient errors, waiting ``min_wait``, 2x, 4x... capped at
    ``max_wait`` (jittered, w/2..w), at least the server's Retry-After;
    then :class:`EscalationError`. Conflicts are retried only by
    ``update()``: ``conflict_base`` doubling up to ``conflict_cap`` (1, 2,
    4, 8, 16, 32 s by default). Fatal errors are raised at once.
    ``attempt_timeout`` bounds each try (socket timeout).
    """

    attempts: int = 5
    min_wait: float = 0.1
    max_wait: float = 2.0
    attempt_timeout: float = 10.0
    conflict_base: float = 1.0
    conflict_cap: float = 32.0
    conflict_jitter: bool = False
    on_retry: Callable[[EskvError, int, float], None] | None = None

    def transient(self) -> Backoff:
        """The schedule of waits between transient tries: attempts-1 of them."""
        return Backoff(self.min_wait, self.max_wait, True, max(self.attempts - 1, 0))

    def waits(self) -> Backoff:
        """The unbounded transient schedule (watches, lease renewals)."""
        return Backoff(self.min_wait, self.max_wait, True, -1)

    def conflict(self) -> Backoff:
        """update()'s schedule: conflict_base doubling, the last wait conflict_cap."""
        n, w = 0, self.conflict_base
        while True:
            n += 1
            if w >= self.conflict_cap or w <= 0:
                break
            w *= 2
        return Backoff(self.conflict_base, self.conflict_cap, self.conflict_jitter, n)


#: How long after its wait's end a blocking wait is still retried.
WAIT_GRACE = 5.0


class Retrier:
    """One call's retry state: :meth:`request` is each try's request (and
    how much longer than the policy's attempt timeout it may take); after
    each failed try, :meth:`after` returns how long to wait before the next,
    or raises the error to give up.

    A blocking wait (``Request.wait``) is retried for as long as it lasts
    and WAIT_GRACE after (a fail-over takes longer than 5 tries), each try
    asking for what is left of it, as the Go client does."""

    def __init__(self, policy: RetryPolicy, retry: bool, schedule: Backoff | None = None,
                 retriable: Callable[[EskvError], bool] | None = None, wait: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy, self.retry, self.clock = policy, retry, clock
        self.schedule = schedule or (policy.waits() if wait > 0 else policy.transient())
        self.retriable = retriable or (lambda e: classify(e) == TRANSIENT)
        self.attempt = 0
        self.until = clock() + wait if wait > 0 else 0.0

    def request(self, req: Request) -> tuple[Request, float]:
        """The next try's request, and the time it may take beyond the
        attempt timeout (what is left of its wait)."""
        if req.wait <= 0:
            return req, 0.0
        left = max(self.until - self.clock(), 0.0)
        q = [kv for kv in req.query if kv[0] != "wait"] + [("wait", f"{int(left * 1000)}ms")]
        return dataclasses.replace(req, query=q), left

    def after(self, err: EskvError) -> float:
        """The wait before the next try after err; raises err when it is not
        retried, or an EscalationError when the schedule is used up."""
        self.attempt += 1
        if not self.retry or not self.retriable(err):
            raise err
        wait = self.schedule.next()
        if wait is None:
            raise EscalationError(self.attempt, err) from err
        wait = max(wait, err.retry_after)
        if self.until and self.clock() + wait > self.until + WAIT_GRACE:
            raise err
        if self.policy.on_retry is not None:
            self.policy.on_retry(err, self.attempt, wait)
        return wait


# --- watch streams ------------------------------------------------------

@dataclass
class SSEEvent:
    """One dispatched Server-Sent Event."""

    event: str
    id: str
    data: str


class SSEParser:
    """Incremental Server-Sent Events parser: feed it lines (without their
    line breaks); a blank line dispatches the event before it. Comments
    (``: ping``) are ignored."""

    def __init__(self) -> None:
        self._event, self._id = "", ""
        self._data: list[str] = []

    def feed(self, line: str) -> SSEEvent | None:
        """Take one line; returns the event a blank line dispatches, if any."""
        line = line.rstrip("\r\n")
        if line == "":
            if not (self._event or self._id or self._data):
                return None
            ev = SSEEvent(self._event or "message", self._id, "\n".join(self._data))
            self._event, self._id, self._data = "", "", []
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        elif name == "data":
            self._data.append(value)
        return None


class WatchEnded(TransportError):
    """A watch stream that ended without a word from the server."""


class WatchState:
    """The state of one resuming watch across its connections: where the
    next connection starts (after the last cursor seen) and what each
    stream event means."""

    def __init__(self, prefix: str = "", key: str = "", after: str = "", from_version: int = 0) -> None:
        if bool(prefix) == bool(key):
            from .errors import Invalid
            raise Invalid("watch needs exactly one of prefix and key", detail={"field": "prefix"})
        self.prefix, self.key, self.after, self.from_version = prefix, key, after, from_version

    @property
    def cursor(self) -> str:
        """The cursor the watch resumes after ("" before any)."""
        return self.after

    def request(self) -> Request:
        """The next connection's request: after the last cursor once known."""
        q: list[tuple[str, str]] = [("prefix", self.prefix)] if self.prefix else [("key", self.key)]
        if self.after:
            q.append(("after", self.after))
        elif self.from_version > 0:
            q.append(("fromVersion", str(self.from_version)))
        return Request("GET", "/v1/watch", q, key=self.key, accept="text/event-stream")

    def move_to(self, cursor: str) -> None:
        """Make cursor the next connection's starting point."""
        if cursor:
            self.after, self.from_version = cursor, 0

    def on_event(self, ev: SSEEvent) -> dict[str, Any] | None:
        """The change an SSE event carries (None for others); raises the
        error an ``error`` event ends the stream with, after moving to its cursor."""
        if ev.id:
            self.move_to(ev.id)
        if ev.event == "change":
            try:
                change = json.loads(ev.data)
            except ValueError as e:
                raise Internal(f"undecodable watch event: {ev.data[:200]}") from e
            self.move_to(change.get("cursor", ""))
            return change
        if ev.event == "error":
            try:
                end = json.loads(ev.data)
                detail = end["error"]
            except (ValueError, KeyError, TypeError) as e:
                raise Internal(f"undecodable end of watch: {ev.data[:200]}") from e
            self.move_to(end.get("cursor", ""))
            raise error_from_detail(detail)
        return None


def watch_transient(err: EskvError) -> bool:
    """Whether a watch reconnects after err (the Go client's rule)."""
    return isinstance(err, (SlowConsumer, TooManyWatches)) or classify(err) == TRANSIENT


def lease_transient(err: EskvError) -> bool:
    """Whether a lease renewal is retried after err (until the lease's end)."""
    return classify(err) == TRANSIENT or isinstance(err, Internal)


def query_items(params: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    """Query pairs without None values, booleans as true/false."""
    items = params.items() if isinstance(params, Mapping) else params
    out: list[tuple[str, str]] = []
    for k, v in items:
        if v is None:
            continue
        out.append((k, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return out
