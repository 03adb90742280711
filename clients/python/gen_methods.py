"""Writes src/eskv/_methods.py: the API methods of Client and AsyncClient,
one spec each, so both clients have the same methods (the async ones
awaiting). Run it after changing SPECS: ``python3 gen_methods.py``."""

from __future__ import annotations

import pathlib

# (name, parameters after self, the ops call, docstring)
SPECS: list[tuple[str, str, str, str]] = [
    ("get", "key: str, *, at: str | None = None, field: str | None = None",
     "ops.get(key, at=at, field=field)",
     "The key's entry (``value``, ``version``...); ``position`` tells the log position it reflects. Absent: NotFound."),
    ("put", "key: str, value: Any, *, expected_version: int | None = None, ttl: int | None = None, "
     "keep_ttl: bool | None = None, semantics: Mapping[str, Any] | None = None, request_id: str | None = None, "
     "spec_ref: str | None = None, session: str | None = None",
     "ops.put(key, value, expected_version=expected_version, ttl=ttl, keep_ttl=keep_ttl, semantics=semantics, "
     "request_id=request_id, spec_ref=spec_ref, session=session)",
     "Write a new version: the entry after it (``replayed`` when a retry repeated it). ``expected_version``: "
     "None unconditional, 0 the key must be absent, N compare-and-swap (VersionConflict with ``current_version``)."),
    ("delete", "key: str, *, expected_version: int | None = None, request_id: str | None = None",
     "ops.delete(key, expected_version=expected_version, request_id=request_id)",
     "Delete the key: ``{\"key\",\"version\",\"deleted\":true}``; NotFound when absent."),
    ("patch", "key: str, *, set: Mapping[str, Any] | None = None, unset: Sequence[str] | None = None, "
     "if_field: str | None = None, if_equals: Any = None, create: bool | None = None, "
     "expected_version: int | None = None, ttl: int | None = None, request_id: str | None = None",
     "ops.patch(key, set=set, unset=unset, if_field=if_field, if_equals=if_equals, create=create, "
     "expected_version=expected_version, ttl=ttl, request_id=request_id)",
     "Set/unset top-level fields of an object value; ``if_field``/``if_equals`` make it a field CAS (FieldMismatch)."),
    ("increment", "key: str, by: int = 1, *, min: int | None = None, max: int | None = None, "
     "create: bool | None = None, ttl: int | None = None, request_id: str | None = None",
     "ops.increment(key, by, min=min, max=max, create=create, ttl=ttl, request_id=request_id)",
     "Atomically add ``by``; the entry's ``value`` is the new count. Outside ``min``/``max``: OutOfRange."),
    ("touch", "key: str, *, ttl: int | None = None, persist: bool = False, expected_version: int | None = None, "
     "request_id: str | None = None",
     "ops.touch(key, ttl=ttl, persist=persist, expected_version=expected_version, request_id=request_id)",
     "A new expiry ``ttl`` seconds from now, or none (``persist``); the value kept."),
    ("counter", "key: str", "ops.counter(key)", "A counter's value: ``{\"key\",\"value\",\"version\"}``."),
    ("list", "prefix: str, *, limit: int | None = None, cursor: str | None = None, at: str | None = None, "
     "filter: tuple[str, str, Any] | None = None",
     "ops.list_page(prefix, limit=limit, cursor=cursor, at=at, filter=filter)",
     "One page of the live entries under a prefix: ``items``, ``truncated``, ``nextCursor``, ``position`` "
     "(every page of one listing answers as of its first page's position)."),
    ("list_keys", "prefix: str, *, limit: int | None = None, cursor: str | None = None, at: str | None = None",
     "ops.list_page(prefix, limit=limit, cursor=cursor, at=at, keys_only=True)",
     "One page of the keys under a prefix without values: ``items`` of ``{\"key\",\"version\",\"purpose\"}``, "
     "``count``, ``truncated``, ``nextCursor``, ``position``."),
    ("field_indexes", "scope: str",
     "ops.get(scope + '/.eskv/field-indexes')",
     "The project's (``tenant/<t>/project/<p>``) field-index declaration: its entry, ``value`` "
     "``{\"fields\": [...]}`` (the fields filtered scans read from an index), ``version`` for "
     "``set_field_indexes``; NotFound when it declares nothing."),
    ("field_index_status", "scope: str",
     "ops.field_index_status(scope)",
     "Whether each field the project declares is indexed yet: ``scope``, ``version`` (0: none declared), "
     "``fields`` of ``{\"field\",\"state\"}`` in name order, ``state`` ``ready`` (scans read the index) or "
     "``building`` (scans read the values until it is ready)."),
    ("set_field_indexes", "scope: str, fields: Sequence[str], *, expected_version: int | None = None, "
     "request_id: str | None = None",
     "ops.put(scope + '/.eskv/field-indexes', {'fields': list(fields)}, expected_version=expected_version, "
     "semantics={'purpose': 'config'}, request_id=request_id)",
     "Declare exactly ``fields`` (at most 16) for the project's filtered scans; give ``expected_version`` "
     "(0: none yet) so that a concurrent declarer's change is not lost (VersionConflict)."),
    ("history", "key: str, *, from_version: int | None = None, limit: int | None = None, cursor: str | None = None",
     "ops.history(key, from_version=from_version, limit=limit, cursor=cursor)",
     "One page of the key's versions, oldest first: ``versions``, ``cursor``."),
    ("txn", "ops_: Sequence[Mapping[str, Any]], *, request_id: str | None = None",
     "ops.txn(ops_, request_id=request_id)",
     "Apply 1..100 ops of one project atomically (``results``); a refusal is the failing op's typed error "
     "with ``failed_op``."),
    ("acquire", "key: str, holder: str, *, ttl: int | None = None, session: str | None = None, "
     "request_id: str | None = None, wait: float | None = None",
     "ops.lock_op(key, 'acquire', holder, ttl=ttl, session=session, request_id=request_id, wait=wait)",
     "Take a reentrant TTL lock: ``{\"holder\",\"token\",\"version\",\"expiresAt\"}``; LockHeld when taken "
     "(after waiting ``wait`` seconds, at most 30, when given)."),
    ("extend", "key: str, holder: str, *, ttl: int | None = None, request_id: str | None = None",
     "ops.lock_op(key, 'extend', holder, ttl=ttl, request_id=request_id)",
     "Renew a held lock for ``ttl`` seconds from now; NotLockHolder when not held by ``holder``."),
    ("release", "key: str, holder: str, *, request_id: str | None = None",
     "ops.lock_op(key, 'release', holder, request_id=request_id)",
     "Release a held lock; NotLockHolder when not held by ``holder``."),
    ("lock_info", "key: str", "ops.lock_info(key, 'lock')", "Who holds the lock (GET :lock)."),
    ("elect", "key: str, holder: str, *, ttl: int | None = None, session: str | None = None, "
     "request_id: str | None = None",
     "ops.lock_op(key, 'elect', holder, ttl=ttl, session=session, request_id=request_id)",
     "Become the pool's leader (the token is the term); NotLeader when another leads."),
    ("heartbeat", "key: str, holder: str, *, ttl: int | None = None, request_id: str | None = None",
     "ops.lock_op(key, 'heartbeat', holder, ttl=ttl, request_id=request_id)",
     "Renew a leadership."),
    ("resign", "key: str, holder: str, *, request_id: str | None = None",
     "ops.lock_op(key, 'resign', holder, request_id=request_id)", "Step down as leader."),
    ("leader", "key: str", "ops.lock_info(key, 'leader')", "Who leads the pool (GET :leader)."),
    ("qpush", "key: str, data: Any, *, priority: int | None = None, dedup_id: str | None = None, "
     "item_ttl: int | None = None, ttl: int | None = None, request_id: str | None = None",
     "ops.qpush(key, data, priority=priority, dedup_id=dedup_id, item_ttl=item_ttl, ttl=ttl, request_id=request_id)",
     "Push an item onto a queue: ``{\"queue\",\"item\",\"priority\",\"size\",\"version\"}``."),
    ("qpop", "key: str, *, visibility_timeout: int | None = None, request_id: str | None = None, "
     "wait: float | None = None",
     "ops.qpop(key, visibility_timeout=visibility_timeout, request_id=request_id, wait=wait)",
     "Take the next item (``data``, ``receipt``, ``deliveries``); QueueEmpty when none is ready "
     "(after waiting ``wait`` seconds, at most 30, when given)."),
    ("qack", "key: str, receipt: str, *, request_id: str | None = None",
     "ops.qack(key, receipt, request_id=request_id)",
     "Acknowledge a delivery by its receipt; StaleReceipt when it is not current."),
    ("qpeek", "key: str, count: int | None = None", "ops.qpeek(key, count)", "The next ready items, read-only."),
    ("qsize", "key: str", "ops.qsize(key)", "``{\"queue\",\"size\",\"inFlight\"}`` (0 for a missing queue)."),
    ("sadd", "key: str, member: str, *, request_id: str | None = None",
     "ops.element_write(key, 'sadd', {'member': member}, request_id)", "Add a member to a set (``added``)."),
    ("srem", "key: str, member: str, *, request_id: str | None = None",
     "ops.element_write(key, 'srem', {'member': member}, request_id)", "Remove a member from a set (``removed``)."),
    ("sismember", "key: str, member: str", "ops.element_read(key, 'sismember', {'member': member})",
     "Whether a member is in the set (``isMember``)."),
    ("smembers", "key: str, *, limit: int | None = None, cursor: str | None = None",
     "ops.element_read(key, 'smembers', {'limit': limit, 'cursor': cursor})",
     "One page of a set's members (``members``, ``cursor``)."),
    ("scard", "key: str", "ops.element_read(key, 'scard')", "A set's size (``size``)."),
    ("lpush", "key: str, value: Any, *, request_id: str | None = None",
     "ops.element_write(key, 'lpush', {'value': value}, request_id)", "Push a value at a list's head."),
    ("rpush", "key: str, value: Any, *, request_id: str | None = None",
     "ops.element_write(key, 'rpush', {'value': value}, request_id)", "Push a value at a list's tail."),
    ("lpop", "key: str, *, request_id: str | None = None, wait: float | None = None",
     "ops.element_write(key, 'lpop', {}, request_id, wait)",
     "Pop a list's head (NotFound when empty, after waiting ``wait`` seconds when given)."),
    ("rpop", "key: str, *, request_id: str | None = None, wait: float | None = None",
     "ops.element_write(key, 'rpop', {}, request_id, wait)",
     "Pop a list's tail (NotFound when empty, after waiting ``wait`` seconds when given)."),
    ("ltrim", "key: str, start: int, stop: int, *, request_id: str | None = None",
     "ops.element_write(key, 'ltrim', {'start': start, 'stop': stop}, request_id)",
     "Keep positions start..stop (Redis indexes, inclusive)."),
    ("lrange", "key: str, start: int = 0, stop: int = -1",
     "ops.element_read(key, 'lrange', {'start': start, 'stop': stop})", "A list's values start..stop (``values``)."),
    ("llen", "key: str", "ops.element_read(key, 'llen')", "A list's length (``length``)."),
    ("session", "key: str, ttl: int, *, request_id: str | None = None",
     "ops.session_op(key, 'session', ttl=ttl, request_id=request_id)",
     "Create a session: a TTL keys, locks and leaderships share."),
    ("keepalive", "key: str, *, request_id: str | None = None",
     "ops.session_op(key, 'keepalive', request_id=request_id)", "Renew a session for its TTL."),
    ("revoke", "key: str, *, request_id: str | None = None",
     "ops.session_op(key, 'revoke', request_id=request_id)", "End a session (its keys go, its locks are released)."),
    ("projects", "*, limit: int | None = None, cursor: str | None = None",
     "ops.projects(limit=limit, cursor=cursor)",
     "One page of the projects the token may read: ``items`` of ``{\"tenant\",\"project\",\"keys\"}``."),
    ("batch_get", "keys: Sequence[str]", "ops.batch_get(keys)",
     "Read up to 1000 keys: ``items`` of ``{\"key\",\"entry\"?,\"error\"?}``."),
    ("delete_range", "prefix: str, *, chunked: bool | None = None, cursor: str | None = None",
     "ops.delete_range(prefix, chunked=chunked, cursor=cursor)",
     "Delete every key under a prefix of one project (not retried: it has no request id)."),
    ("expire_due", "prefix: str, *, cursor: str | None = None", "ops.expire_due(prefix, cursor=cursor)",
     "Expire now the keys under a prefix past their expiry (``count``, ``truncated``, ``nextCursor``)."),
    ("version", "", "ops.version()", "The server's build: ``{\"version\",\"revision\",\"goVersion\"}``."),
]

HEAD = '''"""The API methods of Client and AsyncClient (generated by gen_methods.py:
edit it, not this file). Each builds its request with :mod:`eskv.ops` and
sends it through the client's ``_call`` with the retry policy."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import ops
from ._core import Answer, Call


'''


def method(name: str, params: str, expr: str, doc: str, is_async: bool) -> str:
    """One method's source."""
    sig = "self" + (", " + params if params else "")
    kw = "async def" if is_async else "def"
    aw = "await " if is_async else ""
    return f'    {kw} {name}({sig}) -> Answer:\n        """{doc}"""\n        return {aw}self._call({expr})\n\n'


def main() -> None:
    """Write the module."""
    out = [HEAD]
    for cls, is_async in (("SyncMethods", False), ("AsyncMethods", True)):
        kw = "async def" if is_async else "def"
        out.append(f"class {cls}:\n    \"\"\"The API methods{' (coroutines)' if is_async else ''}.\"\"\"\n\n")
        out.append(f"    {kw} _call(self, call: Call[Answer]) -> Answer:\n"
                   "        \"\"\"Send one call with the retry policy.\"\"\"\n"
                   "        raise NotImplementedError\n\n")
        for spec in SPECS:
            out.append(method(*spec, is_async=is_async))
        out[-1] = out[-1].rstrip("\n") + "\n\n\n"
    path = pathlib.Path(__file__).parent / "src" / "eskv" / "_methods.py"
    path.write_text("".join(out).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
