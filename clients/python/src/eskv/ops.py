"""Request builders of every API call (sans-IO): each returns a
:class:`~eskv._core.Call` that either client sends.

Every write carries a request id — the caller's, or a new UUIDv7 — built
in here once, so every retry of the call repeats the same id and the server
applies the write at most once (a repeat is answered as a replay).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ._core import Answer, Call, Request, encode, key_path, new_request_id, parse_answer, query_items


def _read(key: str, verb: str = "", query: Mapping[str, Any] | None = None) -> Call[Answer]:
    """A GET of a key's route."""
    return Call(Request("GET", key_path(key, verb), query_items(query or {}), key=key), parse_answer)


def _write(method: str, key: str, verb: str, body: Mapping[str, Any], request_id: str | None,
           wait: float | None = None) -> Call[Answer]:
    """A write of a key's route with its request id (retried with it), and
    a blocking wait of ``wait`` seconds (at most 30) when given. Members
    that are None are left out, but ``value`` and ``data`` (JSON null)."""
    doc = {k: v for k, v in body.items() if v is not None or k in ("value", "data")}
    doc["requestId"] = request_id or new_request_id()
    return Call(Request(method, key_path(key, verb), body=encode(doc), key=key, retry=True, wait=wait or 0.0),
                parse_answer)


def _post(path: str, body: Mapping[str, Any], retry: bool) -> Call[Answer]:
    """A POST of a route that is not one key's."""
    doc = {k: v for k, v in body.items() if v is not None}
    return Call(Request("POST", path, body=encode(doc), retry=retry), parse_answer)


def get(key: str, *, at: str | None = None, field: str | None = None) -> Call[Answer]:
    """GET /v1/kv/{key}: the entry (``at``: a position or RFC 3339 time of the
    past; ``field``: one top-level field). Absent: NotFound."""
    return _read(key, query={"at": at, "field": field})


def put(key: str, value: Any, *, expected_version: int | None = None, ttl: int | None = None,
        keep_ttl: bool | None = None, semantics: Mapping[str, Any] | None = None,
        request_id: str | None = None, spec_ref: str | None = None, session: str | None = None) -> Call[Answer]:
    """PUT /v1/kv/{key}: write a new version. ``expected_version`` None:
    unconditional, 0: the key must be absent, N: compare-and-swap
    (VersionConflict otherwise). ``ttl`` seconds (None: no expiry unless
    ``keep_ttl``); ``semantics`` ``{"purpose","producer",...}``."""
    return _write("PUT", key, "", {"value": value, "expectedVersion": expected_version, "ttlSeconds": ttl,
                                   "keepTtl": keep_ttl or None, "semantics": semantics, "specRef": spec_ref,
                                   "session": session}, request_id)


def delete(key: str, *, expected_version: int | None = None, request_id: str | None = None) -> Call[Answer]:
    """DELETE /v1/kv/{key}: ``{"key","version","deleted":true}``; NotFound when absent."""
    rid = request_id or new_request_id()
    q = query_items({"expectedVersion": expected_version, "requestId": rid})
    return Call(Request("DELETE", key_path(key), q, key=key, retry=True), parse_answer)


def patch(key: str, *, set: Mapping[str, Any] | None = None, unset: Sequence[str] | None = None,
          if_field: str | None = None, if_equals: Any = None, create: bool | None = None,
          expected_version: int | None = None, ttl: int | None = None, request_id: str | None = None) -> Call[Answer]:
    """PATCH /v1/kv/{key}: set/unset top-level fields of an object; with
    ``if_field``/``if_equals`` a field compare-and-swap (FieldMismatch)."""
    cond = {"field": if_field, "equals": if_equals} if if_field is not None else None
    return _write("PATCH", key, "", {"set": set, "unset": list(unset) if unset else None, "if": cond,
                                     "create": create, "expectedVersion": expected_version,
                                     "ttlSeconds": ttl}, request_id)


def increment(key: str, by: int = 1, *, min: int | None = None, max: int | None = None,
              create: bool | None = None, ttl: int | None = None, request_id: str | None = None) -> Call[Answer]:
    """POST :increment: atomic add (``value`` is the new count); a result
    outside ``min``/``max`` is OutOfRange and changes nothing."""
    return _write("POST", key, "increment", {"by": by, "min": min, "max": max, "create": create,
                                             "ttlSeconds": ttl}, request_id)


def touch(key: str, *, ttl: int | None = None, persist: bool = False, expected_version: int | None = None,
          request_id: str | None = None) -> Call[Answer]:
    """POST :touch: a new expiry ``ttl`` seconds from now, or none (``persist``)."""
    return _write("POST", key, "touch", {"ttlSeconds": ttl, "persist": persist or None,
                                         "expectedVersion": expected_version}, request_id)


def counter(key: str) -> Call[Answer]:
    """GET :counter: ``{"key","value","version"}``."""
    return _read(key, "counter")


def field_index_status(scope: str) -> Call[Answer]:
    """GET <scope>/.eskv/field-indexes:indexStatus: ``{"scope","version","fields"}``."""
    return _read(scope + "/.eskv/field-indexes", "indexStatus")


def list_page(prefix: str, *, limit: int | None = None, cursor: str | None = None, at: str | None = None,
              keys_only: bool = False, filter: tuple[str, str, Any] | None = None) -> Call[Answer]:
    """GET /v1/kv: one page of the live entries (or with ``keys_only`` the
    keys) under a prefix, in key order: ``items``, ``truncated``,
    ``nextCursor``, ``position`` (every page of one listing is one snapshot
    at its first page's position). ``filter`` is ``(field, op, value)``."""
    q: dict[str, Any] = {"prefix": prefix, "limit": limit, "cursor": cursor, "at": at,
                         "keysOnly": True if keys_only else None}
    if filter is not None:
        f, op, v = filter
        q.update({"field": f, "op": op, "value": v if isinstance(v, str) else encode(v).decode()})
    return Call(Request("GET", "/v1/kv", query_items(q)), parse_answer)


def history(key: str, *, from_version: int | None = None, limit: int | None = None,
            cursor: str | None = None) -> Call[Answer]:
    """GET :history: the key's versions, oldest first (``versions``, ``cursor``)."""
    return _read(key, "history", {"fromVersion": from_version, "limit": limit, "cursor": cursor})


def txn(ops: Sequence[Mapping[str, Any]], *, request_id: str | None = None) -> Call[Answer]:
    """POST /v1/txn: 1..100 ops of one project, all or none (``results``).
    A refusal is the failing op's typed error with ``failed_op``."""
    body = {"ops": list(ops), "requestId": request_id or new_request_id()}
    return _post("/v1/txn", body, True)


def lock_op(key: str, verb: str, holder: str, *, ttl: int | None = None, session: str | None = None,
            request_id: str | None = None, wait: float | None = None) -> Call[Answer]:
    """POST :acquire/:extend/:release (and :elect/:heartbeat/:resign):
    ``{"key","holder","token","version","acquiredAt","expiresAt"?}``;
    an acquire with ``wait`` waits that long for the lock (granted in
    arrival order)."""
    body: dict[str, Any] = {"holder": holder}
    if verb not in ("release", "resign"):
        body.update({"ttlSeconds": ttl, "session": session})
    return _write("POST", key, verb, body, request_id, wait if verb == "acquire" else None)


def lock_info(key: str, verb: str = "lock") -> Call[Answer]:
    """GET :lock (or :leader): who holds it."""
    return _read(key, verb)


def qpush(key: str, data: Any, *, priority: int | None = None, dedup_id: str | None = None,
          item_ttl: int | None = None, ttl: int | None = None, request_id: str | None = None) -> Call[Answer]:
    """POST :qpush: push an item; ``{"queue","item","priority","size","version"}``."""
    return _write("POST", key, "qpush", {"data": data, "priority": priority, "dedupId": dedup_id,
                                         "itemTtlSeconds": item_ttl, "ttlSeconds": ttl}, request_id)


def qpop(key: str, *, visibility_timeout: int | None = None, request_id: str | None = None,
         wait: float | None = None) -> Call[Answer]:
    """POST :qpop: the next item (``data``, ``receipt``, ``deliveries``);
    QueueEmpty when none is ready (after ``wait`` seconds when given)."""
    return _write("POST", key, "qpop", {"visibilityTimeoutSeconds": visibility_timeout}, request_id, wait)


def qack(key: str, receipt: str, *, request_id: str | None = None) -> Call[Answer]:
    """POST :qack: acknowledge a delivery; StaleReceipt when it is not current."""
    return _write("POST", key, "qack", {"receipt": receipt}, request_id)


def qpeek(key: str, count: int | None = None) -> Call[Answer]:
    """GET :qpeek: the next ``count`` ready items, read-only."""
    return _read(key, "qpeek", {"count": count})


def qsize(key: str) -> Call[Answer]:
    """GET :qsize: ``{"queue","size","inFlight"}``."""
    return _read(key, "qsize")


def element_write(key: str, verb: str, body: Mapping[str, Any], request_id: str | None = None,
                  wait: float | None = None) -> Call[Answer]:
    """POST of a set or list write (sadd, srem, lpush, rpush, lpop, rpop,
    ltrim); a pop may wait ``wait`` seconds for a value."""
    return _write("POST", key, verb, body, request_id, wait)


def element_read(key: str, verb: str, query: Mapping[str, Any] | None = None) -> Call[Answer]:
    """GET of a set or list read (sismember, smembers, scard, lrange, llen)."""
    return _read(key, verb, query)


def session_op(key: str, verb: str, *, ttl: int | None = None, request_id: str | None = None) -> Call[Answer]:
    """POST :session (create, ``ttl``), :keepalive or :revoke."""
    return _write("POST", key, verb, {"ttlSeconds": ttl}, request_id)


def projects(*, limit: int | None = None, cursor: str | None = None) -> Call[Answer]:
    """GET /v1/projects: the projects the token may read, with key counts."""
    return Call(Request("GET", "/v1/projects", query_items({"limit": limit, "cursor": cursor})), parse_answer)


def batch_get(keys: Sequence[str]) -> Call[Answer]:
    """POST /v1/kv:batchGet: each key answered as GET answers it."""
    return _post("/v1/kv:batchGet", {"keys": list(keys)}, True)


def delete_range(prefix: str, *, chunked: bool | None = None, cursor: str | None = None) -> Call[Answer]:
    """POST /v1/kv:deleteRange: delete every key under a prefix (not retried:
    it takes no request id)."""
    return _post("/v1/kv:deleteRange", {"prefix": prefix, "chunked": chunked, "cursor": cursor}, False)


def expire_due(prefix: str, *, cursor: str | None = None) -> Call[Answer]:
    """POST /v1/kv:expireDue: expire now the keys under a prefix past their
    expiry, at most 1000 a call (``count``, ``truncated``, ``nextCursor``)."""
    return _post("/v1/kv:expireDue", {"prefix": prefix, "cursor": cursor}, True)


def version() -> Call[Answer]:
    """GET /version: the server's build."""
    return Call(Request("GET", "/version"), parse_answer)
