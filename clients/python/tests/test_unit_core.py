"""Unit tests of the sans-IO core: error mapping, retry policy, SSE parsing,
watch resume state, HTTP/1.1 framing. No server needed."""

from __future__ import annotations

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import eskv  # noqa: E402
from eskv import _http11, errors, ops  # noqa: E402
from eskv._core import (CONFLICT, FATAL, TRANSIENT, Backoff, Response, Retrier, RetryPolicy, SSEEvent, SSEParser,  # noqa: E402
                        WatchState, classify, handle, key_path, parse_answer, uuid7)


def answer(status: int, detail: dict | None = None, headers: dict | None = None, raw: bytes | None = None) -> Response:
    """A response whose body is an API error (or raw bytes)."""
    body = raw if raw is not None else json.dumps({"error": detail}).encode()
    return Response(status, headers or {}, body)


class TestErrorMapping(unittest.TestCase):
    """Every error code of docs/api.md maps to its class."""

    def test_every_code_has_its_class(self) -> None:
        cases = {
            (400, "invalid"): eskv.Invalid, (401, "unauthenticated"): eskv.Unauthenticated,
            (403, "forbidden"): eskv.Forbidden, (404, "not_found"): eskv.NotFound,
            (409, "version_conflict"): eskv.VersionConflict, (409, "lock_held"): eskv.LockHeld,
            (409, "not_leader"): eskv.NotLeader, (409, "not_lock_holder"): eskv.NotLockHolder,
            (409, "field_mismatch"): eskv.FieldMismatch, (409, "wrong_type"): eskv.WrongType,
            (404, "queue_empty"): eskv.QueueEmpty, (409, "stale_receipt"): eskv.StaleReceipt,
            (409, "out_of_range"): eskv.OutOfRange, (413, "value_too_large"): eskv.ValueTooLarge,
            (410, "snapshot_expired"): eskv.SnapshotExpired, (410, "cursor_expired"): eskv.CursorExpired,
            (503, "partition_unavailable"): eskv.PartitionUnavailable, (503, "outcome_unknown"): eskv.OutcomeUnknown,
            (503, "forward_loop"): eskv.ForwardLoop, (429, "too_many_requests"): eskv.TooManyRequests,
            (409, "too_many_keys"): eskv.TooManyKeys, (503, "too_many_watches"): eskv.TooManyWatches,
            (500, "internal"): eskv.Internal,
        }
        for (status, code), cls in cases.items():
            with self.subTest(code=code):
                e = errors.error_from_answer(status, {}, answer(status, {"code": code, "message": "m"}).body)
                self.assertIs(type(e), cls)
                self.assertIsInstance(e, eskv.EskvError)
                self.assertEqual((e.code, e.status, e.message), (code, status, "m"))

    def test_version_conflict_details(self) -> None:
        d = {"code": "version_conflict", "message": "m", "currentVersion": 7, "currentValue": {"a": 1},
             "correlationId": "c-1", "field": "ops[2].condition.version", "failedOp": 2}
        e = errors.error_from_answer(409, {}, answer(409, d).body)
        assert isinstance(e, eskv.VersionConflict)
        self.assertEqual((e.current_version, e.current_value, e.correlation_id), (7, {"a": 1}, "c-1"))
        self.assertEqual((e.field, e.failed_op), ("ops[2].condition.version", 2))
        self.assertIn("ops[2].condition.version", str(e))

    def test_invalid_names_field_and_is_value_error(self) -> None:
        e = errors.error_from_answer(400, {}, answer(400, {"code": "invalid", "message": "bad", "field": "key"}).body)
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.field, "key")

    def test_retry_after_header_and_body(self) -> None:
        e = errors.error_from_answer(503, {"Retry-After": "3"}, answer(503, {"code": "partition_unavailable"}).body)
        self.assertEqual(e.retry_after, 3.0)
        e = errors.error_from_answer(503, {}, answer(503, {"code": "outcome_unknown", "retryAfterSeconds": 2,
                                                            "requestId": "r-1"}).body)
        self.assertEqual((e.retry_after, e.request_id), (2.0, "r-1"))

    def test_proxy_answers(self) -> None:
        for status in (429, 502, 503, 504):
            e = errors.error_from_answer(status, {"retry-after": "1"}, b"<html>Bad Gateway</html>")
            self.assertIsInstance(e, eskv.PartitionUnavailable, status)
            self.assertEqual(classify(e), TRANSIENT)
        e = errors.error_from_answer(500, {}, b"oops")
        self.assertIsInstance(e, eskv.Internal)
        self.assertEqual(classify(e), FATAL)
        e = errors.error_from_answer(404, {}, b"")
        self.assertIsInstance(e, eskv.Internal)

    def test_handle_and_parse(self) -> None:
        a = handle(Response(200, {"eskv-replayed": "true", "eskv-position": "p1.o2"}, b'{"version":3}'), parse_answer)
        self.assertEqual((a["version"], a.replayed, a.position), (3, True, "p1.o2"))
        with self.assertRaises(eskv.NotFound):
            handle(answer(404, {"code": "not_found", "message": "gone"}), parse_answer)
        with self.assertRaises(eskv.Internal):
            handle(Response(200, {}, b"not json"), parse_answer)


class TestRetryPolicy(unittest.TestCase):
    """The Go client's policy: classes, schedules, escalation."""

    def test_classify(self) -> None:
        self.assertEqual(classify(eskv.TransportError("x")), TRANSIENT)
        for cls in (eskv.PartitionUnavailable, eskv.OutcomeUnknown, eskv.ForwardLoop, eskv.TooManyRequests):
            self.assertEqual(classify(cls("x")), TRANSIENT, cls)
        self.assertEqual(classify(eskv.VersionConflict("x")), CONFLICT)
        self.assertEqual(classify(eskv.VersionConflict("x", detail={"field": "requestId"})), FATAL)
        for cls in (eskv.Invalid, eskv.NotFound, eskv.LockHeld, eskv.Forbidden, eskv.Internal, eskv.ValueTooLarge):
            self.assertEqual(classify(cls("x")), FATAL, cls)
        self.assertEqual(classify(eskv.EscalationError(5, eskv.TransportError("x"))), FATAL)
        self.assertEqual(classify(eskv.UntrustedCertificate("x")), FATAL)

    def test_transient_schedule(self) -> None:
        b = RetryPolicy().transient()
        waits = []
        while (w := b.next()) is not None:
            waits.append(w)
        self.assertEqual(len(waits), 4)  # 5 tries in all
        for w, ceiling in zip(waits, (0.1, 0.2, 0.4, 0.8)):
            self.assertTrue(ceiling / 2 <= w <= ceiling, (w, ceiling))

    def test_transient_schedule_caps(self) -> None:
        b = Backoff(0.1, 2.0, False, -1)
        self.assertEqual([b.next() for _ in range(7)], [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])

    def test_conflict_schedule(self) -> None:
        b = RetryPolicy().conflict()
        self.assertEqual([b.next() for _ in range(7)], [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, None])

    def test_retrier_escalates_after_attempts(self) -> None:
        r = Retrier(RetryPolicy(), retry=True)
        for _ in range(4):
            self.assertGreater(r.after(eskv.TransportError("down")), 0)
        with self.assertRaises(eskv.EscalationError) as cm:
            r.after(eskv.TransportError("down"))
        self.assertEqual(cm.exception.attempts, 5)
        self.assertIsInstance(cm.exception.last, eskv.TransportError)
        self.assertEqual(cm.exception.code, "transport")

    def test_retrier_honours_retry_after(self) -> None:
        r = Retrier(RetryPolicy(), retry=True)
        self.assertEqual(r.after(eskv.TooManyRequests("slow down", retry_after=7)), 7)

    def test_retrier_fatal_and_unsafe_raise_at_once(self) -> None:
        with self.assertRaises(eskv.NotFound):
            Retrier(RetryPolicy(), retry=True).after(eskv.NotFound("x"))
        with self.assertRaises(eskv.VersionConflict):
            Retrier(RetryPolicy(), retry=True).after(eskv.VersionConflict("x"))
        with self.assertRaises(eskv.TransportError):
            Retrier(RetryPolicy(), retry=False).after(eskv.TransportError("x"))

    def test_blocking_wait_asks_what_is_left_and_outlasts_five_tries(self) -> None:
        now = [100.0]
        req = ops.qpop("tenant/a/project/b/q", wait=10).request
        r = Retrier(RetryPolicy(), req.retry, wait=req.wait, clock=lambda: now[0])
        first, extra = r.request(req)
        self.assertEqual((dict(first.query)["wait"], extra), ("10000ms", 10.0))
        for _ in range(8):  # more than the 5 tries of a call without a wait
            now[0] += r.after(eskv.PartitionUnavailable("moving")) + 0.5
        later, extra = r.request(req)
        self.assertEqual([k for k, _ in later.query].count("wait"), 1)
        self.assertLess(extra, 10.0)
        now[0] = 100 + 10 + 5  # the wait and its grace are over
        with self.assertRaises(eskv.PartitionUnavailable):
            r.after(eskv.PartitionUnavailable("moving"))

    def test_on_retry_is_told(self) -> None:
        seen = []
        p = RetryPolicy(on_retry=lambda e, n, w: seen.append((e.code, n)))
        Retrier(p, True).after(eskv.PartitionUnavailable("x"))
        self.assertEqual(seen, [("partition_unavailable", 1)])


class TestRequests(unittest.TestCase):
    """Request building."""

    def test_key_path_escapes_components(self) -> None:
        self.assertEqual(key_path("tenant/a/project/b/user:alice"), "/v1/kv/tenant/a/project/b/user:alice")
        self.assertEqual(key_path("tenant/a/project/b/k", "increment"), "/v1/kv/tenant/a/project/b/k:increment")
        self.assertEqual(key_path("tenant/a/project/b/a b?#"), "/v1/kv/tenant/a/project/b/a%20b%3F%23")
        with self.assertRaises(eskv.Invalid):
            key_path("")

    def test_writes_carry_a_request_id(self) -> None:
        c = ops.put("tenant/a/project/b/k", {"n": 1}, expected_version=0, ttl=5)
        body = json.loads(c.request.body or b"")
        self.assertEqual(body["value"], {"n": 1})
        self.assertEqual((body["expectedVersion"], body["ttlSeconds"]), (0, 5))
        self.assertRegex(body["requestId"], r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        self.assertTrue(c.request.retry)
        self.assertEqual(json.loads(ops.put("tenant/a/project/b/k", 1, request_id="mine").request.body or b"")
                         ["requestId"], "mine")
        d = ops.delete("tenant/a/project/b/k", expected_version=3)
        self.assertIn(("expectedVersion", "3"), d.request.query)
        self.assertTrue(any(k == "requestId" for k, _ in d.request.query))
        self.assertFalse(ops.delete_range("tenant/a/project/b/").request.retry)

    def test_put_of_null_sends_null(self) -> None:
        self.assertEqual(json.loads(ops.put("tenant/a/project/b/k", None).request.body or b"")["value"], None)

    def test_listing_query(self) -> None:
        r = ops.list_page("tenant/a/project/b/", limit=10, keys_only=True).request
        self.assertEqual(r.target(), "/v1/kv?prefix=tenant%2Fa%2Fproject%2Fb%2F&limit=10&keysOnly=true")
        r = ops.list_page("tenant/a/project/b/", filter=("n", "gt", 5)).request
        self.assertIn(("value", "5"), r.query)

    def test_uuid7_sorts_by_time(self) -> None:
        a, b = uuid7(1_700_000_000.000), uuid7(1_700_000_000.002)
        self.assertLess(a, b)
        self.assertEqual(a[14], "7")


class TestSSE(unittest.TestCase):
    """Server-Sent Events parsing and the watch's resume state."""

    def test_parser(self) -> None:
        p = SSEParser()
        lines = [": ping", "", "event: change", "id: p1.o5", "data: {\"a\":", "data: 1}", "", "data: x", ""]
        got = [e for e in (p.feed(line + "\n") for line in lines) if e is not None]
        self.assertEqual(len(got), 2)
        self.assertEqual((got[0].event, got[0].id, got[0].data), ("change", "p1.o5", "{\"a\":\n1}"))
        self.assertEqual((got[1].event, got[1].data), ("message", "x"))

    def test_crlf_and_no_space(self) -> None:
        p = SSEParser()
        self.assertIsNone(p.feed("event:change\r\n"))
        self.assertIsNone(p.feed("data:{}\r\n"))
        ev = p.feed("\r\n")
        assert ev is not None
        self.assertEqual((ev.event, ev.data), ("change", "{}"))

    def test_watch_state_resumes_after_last_cursor(self) -> None:
        s = WatchState(prefix="tenant/a/project/b/", after="p1.o1")
        self.assertIn(("after", "p1.o1"), s.request().query)
        p = SSEParser()
        for line in ("event: change", "id: p1.o4", 'data: {"cursor":"p1.o4","key":"k","version":2}', ""):
            ev = p.feed(line)
        assert ev is not None
        change = s.on_event(ev)
        self.assertEqual(change and change["version"], 2)
        self.assertEqual(s.cursor, "p1.o4")
        self.assertEqual(s.request().query, [("prefix", "tenant/a/project/b/"), ("after", "p1.o4")])

    def test_watch_state_from_version_then_cursor(self) -> None:
        s = WatchState(key="tenant/a/project/b/k", from_version=3)
        self.assertEqual(s.request().query, [("key", "tenant/a/project/b/k"), ("fromVersion", "3")])
        s.move_to("p2.o9")
        self.assertEqual(s.request().query, [("key", "tenant/a/project/b/k"), ("after", "p2.o9")])

    def test_error_event_moves_and_raises(self) -> None:
        s = WatchState(prefix="tenant/a/project/b/")
        data = json.dumps({"error": {"code": "slow_consumer", "message": "behind"}, "cursor": "p1.o8"})
        with self.assertRaises(eskv.SlowConsumer):
            s.on_event(SSEEvent("error", "", data))
        self.assertEqual(s.cursor, "p1.o8")
        data = json.dumps({"error": {"code": "cursor_expired", "message": "gone"}})
        with self.assertRaises(eskv.CursorExpired):
            s.on_event(SSEEvent("error", "", data))

    def test_watch_needs_one_scope(self) -> None:
        with self.assertRaises(eskv.Invalid):
            WatchState()
        with self.assertRaises(eskv.Invalid):
            WatchState(prefix="a/", key="b")


class TestHTTP11(unittest.TestCase):
    """The async client's HTTP/1.1 framing."""

    def test_request_head(self) -> None:
        h = _http11.request_head("PUT", "/v1/kv/k", "h:1", {"A": "b"}, 3)
        self.assertEqual(h, b"PUT /v1/kv/k HTTP/1.1\r\nHost: h:1\r\nConnection: keep-alive\r\nA: b\r\n"
                            b"Content-Length: 3\r\n\r\n")
        with self.assertRaises(_http11.ProtocolError):
            _http11.request_head("GET", "/", "h", {"A": "b\r\nX: y"}, None)

    def test_status_and_headers(self) -> None:
        self.assertEqual(_http11.parse_status(b"HTTP/1.1 404 Not Found\r\n"), 404)
        self.assertEqual(_http11.parse_header(b"Content-Type: text/plain\r\n"), ("content-type", "text/plain"))
        with self.assertRaises(_http11.ProtocolError):
            _http11.parse_status(b"garbage")

    def test_framing(self) -> None:
        self.assertEqual(_http11.body_framing("GET", 200, {"content-length": "12"}), ("length", 12))
        self.assertEqual(_http11.body_framing("GET", 200, {"transfer-encoding": "chunked"}), ("chunked", 0))
        self.assertEqual(_http11.body_framing("GET", 204, {}), ("none", 0))
        self.assertEqual(_http11.body_framing("GET", 200, {}), ("close", 0))
        self.assertEqual(_http11.chunk_size(b"1a;ext=1\r\n"), 26)
        self.assertFalse(_http11.keeps_alive({"connection": "close"}, "length"))
        self.assertTrue(_http11.keeps_alive({}, "chunked"))


if __name__ == "__main__":
    unittest.main()
