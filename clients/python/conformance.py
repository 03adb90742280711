#!/usr/bin/env python3
"""The Python client's conformance runner: ``python3 clients/python/conformance.py <scenario>``.

Runs one scenario of the conformance protocol (docs/clients.md) against
ESKV_URL with ESKV_TOKEN, under ESKV_PREFIX, using ESKV_CONTROL's
kill-writer and drop-next-response. It prints one line per check and
exits 0 when every check held, 1 (the reason on stderr) otherwise.
"""

from __future__ import annotations

import json
import os
import queue
import re
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

import eskv  # noqa: E402
from eskv._core import TRANSIENT, classify, new_request_id  # noqa: E402


class Failure(Exception):
    """A check that did not hold."""


def check(ok: bool, what: str) -> None:
    """Print what was checked, or fail with it."""
    if not ok:
        raise Failure(what)
    print("ok:", what, flush=True)


def env(name: str) -> str:
    """A required environment variable."""
    v = os.environ.get(name, "")
    if not v:
        raise Failure(f"{name} is not set")
    return v


def control(endpoint: str, **query: str) -> dict[str, Any]:
    """POST a control endpoint of the harness; its JSON answer."""
    url = env("ESKV_CONTROL").rstrip("/") + endpoint
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST"), timeout=60) as r:
        doc: dict[str, Any] = json.loads(r.read() or b"{}")
    return doc


def expect(exc: type[eskv.EskvError], f: Callable[[], Any]) -> eskv.EskvError:
    """The error of type exc that f raises (fails otherwise)."""
    try:
        got = f()
    except exc as e:
        return e
    except eskv.EskvError as e:
        raise Failure(f"want {exc.__name__}, got {type(e).__name__}: {e}") from e
    raise Failure(f"want {exc.__name__}, got an answer: {got}")


def put_riding(c: eskv.Client, key: str, value: Any, budget: float = 60.0) -> eskv.Answer:
    """A put that rides out a fail-over: the client's retry policy, again
    with the SAME request id while its escalations are transient, within budget."""
    rid, end = new_request_id(), time.monotonic() + budget
    while True:
        try:
            return c.put(key, value, request_id=rid)
        except eskv.EscalationError as e:
            if classify(e.last) != TRANSIENT or time.monotonic() > end:
                raise
            print(f"  put {key}: still failing over ({e.last.code}), retrying with the same request id", flush=True)


def write_then_read(c: eskv.Client, p: str) -> None:
    """Scenario 1."""
    put = c.put(p + "k", {"n": 1})
    got = c.get(p + "k")
    check(got["value"] == {"n": 1}, "get answers the value put")
    check(got["version"] == put["version"], f"get answers the version the put answered ({put['version']})")
    c.delete(p + "k")
    e = expect(eskv.NotFound, lambda: c.get(p + "k"))
    check(e.code == "not_found" and e.status == 404, "get after delete raises NotFound (404 not_found)")


def cas_conflict(c: eskv.Client, p: str) -> None:
    """Scenario 2."""
    v1 = c.put(p + "k", {"v": 1})["version"]
    v2 = c.put(p + "k", {"v": 2}, expected_version=v1)["version"]
    check(v2 > v1, f"CAS put on v{v1} succeeds with v{v2}")
    e = expect(eskv.VersionConflict, lambda: c.put(p + "k", {"v": 3}, expected_version=v1))
    check(e.current_version == v2, f"CAS put on v{v1} again raises VersionConflict with current_version {v2}")
    check(bool(e.correlation_id), "the conflict carries a correlation id")
    got = c.get(p + "k")
    check(got["version"] == v2 and got["value"] == {"v": 2}, "get still shows v2's value")


def retry_replay(c: eskv.Client, p: str) -> None:
    """Scenario 3."""
    path = "/v1/kv/" + p + "k"
    armed = control("/drop-next-response", path=path)
    check(bool(armed.get("armed")), f"drop-next-response armed for {path}")
    seen: list[str] = []
    c.policy.on_retry = lambda err, attempt, wait: seen.append(err.code)
    put = c.put(p + "k", {"n": 1})
    c.policy.on_retry = None
    check(put["value"] == {"n": 1}, f"the put succeeded through the retry policy (retried after: {seen or 'a stale connection'})")
    check(put.replayed, "the answer was a replay (Eskv-Replayed: true): the retry carried the same request id")
    hist = c.history(p + "k")
    check(len(hist["versions"]) == 1, f"history of k holds exactly one version ({len(hist['versions'])})")


def _offset(cursor: str) -> tuple[int, int]:
    """A cursor's (partition, offset)."""
    m = re.fullmatch(r"p(\d+)\.o(-?\d+)", cursor)
    if not m:
        raise Failure(f"bad cursor {cursor!r}")
    return int(m.group(1)), int(m.group(2))


def watch_resume(c: eskv.Client, p: str) -> None:
    """Scenario 4."""
    start = c.list_keys(p).position or ""
    reconnects: list[str] = []
    c.policy.on_retry = lambda err, attempt, wait: reconnects.append(err.code) if attempt == 0 else None
    w = c.watch(p, after=start)
    events: queue.Queue[Any] = queue.Queue()

    def follow() -> None:
        """Hand the watch's changes (or its failure) to the main thread."""
        try:
            for ch in w:
                events.put(ch)
        except BaseException as e:  # handed to the main thread
            events.put(e)

    t = threading.Thread(target=follow, daemon=True)
    t.start()

    def next_event(timeout: float) -> dict[str, Any]:
        """The next change the watch delivered."""
        got = events.get(timeout=timeout)
        if isinstance(got, BaseException):
            raise Failure(f"the watch failed: {got!r}")
        return got  # type: ignore[no-any-return]

    try:
        c.put(p + "k1", 1)
        first = next_event(15)
        check(first["key"] == p + "k1", f"the watch delivers k1 ({first['cursor']})")
        killed = control("/kill-writer")
        check("killed" in killed, f"kill-writer killed {killed.get('killed')}")
        for i in range(2, 6):
            put_riding(c, p + f"k{i}", i)
        check(True, "k2..k5 put through the fail-over")
        got: list[dict[str, Any]] = []
        end = time.monotonic() + 60
        while len(got) < 4 and time.monotonic() < end:
            try:
                got.append(next_event(max(end - time.monotonic(), 0.1)))
            except queue.Empty:
                break
        time.sleep(1)
        while not events.empty():
            got.append(next_event(0.1))
        keys = [e["key"][len(p):] for e in got]
        check(keys == ["k2", "k3", "k4", "k5"], f"the same watch delivers k2..k5 exactly once, in order ({keys})")
        offs = [_offset(e["cursor"]) for e in [first] + got]
        check(all(a < b for a, b in zip(offs, offs[1:])), f"positions increase, no repeat ({[e['cursor'] for e in got]})")
        check(bool(reconnects), f"the watch resumed by itself after its stream dropped ({len(reconnects)} reconnection(s))")
    finally:
        w.close()
        t.join(5)
    check(not t.is_alive(), "the watch stopped")


def lock_keepalive_loss(c: eskv.Client, p: str) -> None:
    """Scenario 5."""
    key = p + "lock"
    try:
        with c.lock(key, "holder-a", ttl=2) as lease:
            check(lease.token > 0, f"lock taken with TTL 2 s, token {lease.token}")
            time.sleep(5)
            check(not lease.lost.is_set(), "after 5 s (over twice the TTL) the lease is still held")
            e = expect(eskv.LockHeld, lambda: c.acquire(key, "holder-b", ttl=2))
            check(e.code == "lock_held", "an acquire by another holder raises LockHeld")
            # Broken as an operator would: DELETE at the version read,
            # read again when a renewal moved it in between (as the Go
            # runner's breakLock).
            for attempt in range(1, 11):
                version = c.get(key)["version"]
                broke = time.monotonic()
                try:
                    c.delete(key, expected_version=version)
                    break
                except eskv.VersionConflict:
                    if attempt == 10:
                        raise
            check(True, f"the lock broken as an operator would (DELETE expectedVersion={version})")
            lost = lease.lost.wait(4)
            check(lost, f"the keep-alive reports the loss within 2xTTL ({time.monotonic() - broke:.1f} s)")
            check(isinstance(lease.error, eskv.LeaseLost), f"lease.error is LeaseLost: {lease.error}")
    except eskv.LeaseLost as e:
        check(True, f"the with block's end raises LeaseLost ({e})")
        return
    raise Failure("the with block's end did not raise LeaseLost")


def queue_redeliver(c: eskv.Client, p: str) -> None:
    """Scenario 6."""
    q = p + "q"
    c.qpush(q, {"task": 1})
    first = c.qpop(q, visibility_timeout=1)
    check(first["data"] == {"task": 1} and first["deliveries"] == 1, "qpop delivers the item (deliveries 1)")
    end = time.monotonic() + 5
    second = None
    while second is None:
        try:
            second = c.qpop(q, visibility_timeout=30)
        except eskv.QueueEmpty:
            if time.monotonic() > end:
                raise Failure("not redelivered within 5 s") from None
            time.sleep(0.2)
    check(second["deliveries"] == 2 and second["receipt"] != first["receipt"],
          "within 5 s a qpop delivers it again (deliveries 2, a new receipt)")
    e = expect(eskv.StaleReceipt, lambda: c.qack(q, first["receipt"]))
    check(e.code == "stale_receipt", "qack of the first receipt raises StaleReceipt")
    check(bool(c.qack(q, second["receipt"]).get("acked")), "qack of the second receipt acks it")
    check(c.qsize(q)["size"] == 0, "qsize is 0")


def txn_refusal(c: eskv.Client, p: str) -> None:
    """Scenario 7."""
    va = c.put(p + "a", "a")["version"]
    ops = [{"op": "put", "key": p + "b", "value": "b"},
           {"op": "increment", "key": p + "c", "by": 1, "create": True},
           {"op": "put", "key": p + "a", "value": "a2", "condition": {"version": va + 1}}]
    e = expect(eskv.VersionConflict, lambda: c.txn(ops))
    check(e.failed_op == 2 or (e.field or "").startswith("ops[2]"),
          f"the transaction is refused naming op 2 (failed_op {e.failed_op}, field {e.field})")
    for k in ("b", "c"):
        expect(eskv.NotFound, lambda: c.get(p + k))
        check(True, f"get {k} raises NotFound: nothing applied")


SCENARIOS: dict[str, Callable[[eskv.Client, str], None]] = {
    "write-then-read": write_then_read, "cas-conflict": cas_conflict, "retry-replay": retry_replay,
    "watch-resume": watch_resume, "lock-keepalive-loss": lock_keepalive_loss,
    "queue-redeliver": queue_redeliver, "txn-refusal": txn_refusal,
}


def main(argv: list[str]) -> int:
    """Run the scenario argv[1]."""
    if len(argv) != 2 or argv[1] not in SCENARIOS:
        print(f"usage: conformance.py <{'|'.join(SCENARIOS)}>", file=sys.stderr)
        return 2
    try:
        prefix = env("ESKV_PREFIX")
        with eskv.Client(env("ESKV_URL"), env("ESKV_TOKEN")) as c:
            SCENARIOS[argv[1]](c, prefix if prefix.endswith("/") else prefix + "/")
    except Failure as e:
        print(f"FAIL {argv[1]}: {e}", file=sys.stderr)
        return 1
    except (eskv.EskvError, OSError) as e:
        print(f"FAIL {argv[1]}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"PASS {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
