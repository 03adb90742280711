"""Unit tests of Client and AsyncClient over fake transports (retries,
request ids, update's conflict backoff, watch resume, lease loss) and of
both transports against a local HTTP server. No eskv server needed."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Any, Callable, Iterator, Mapping

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import eskv  # noqa: E402
from eskv._core import Request, Response  # noqa: E402
from eskv.aio import AsyncTransport  # noqa: E402
from eskv.client import HTTPTransport  # noqa: E402

Step = Callable[[Request], Response]


def ok(doc: Mapping[str, Any], **headers: str) -> Step:
    """A step answering 200 with doc."""
    return lambda req: Response(200, dict(headers), json.dumps(doc).encode())


def err(status: int, code: str, **detail: Any) -> Step:
    """A step answering an API error."""
    headers = {"retry-after": str(detail.pop("retry_after"))} if "retry_after" in detail else {}
    body = json.dumps({"error": dict(detail, code=code, message=code)}).encode()
    return lambda req: Response(status, headers, body)


def drop(req: Request) -> Response:
    """A step without an answer."""
    raise eskv.TransportError("connection closed")


class FakeStream:
    """A stream of SSE lines, ending (broken) after them."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def lines(self) -> Iterator[str]:
        yield from (line + "\n" for line in self._lines)

    def close(self) -> None:
        pass

    def release(self) -> None:
        pass


class FakeTransport:
    """Answers requests with scripted steps, recording them."""

    def __init__(self, steps: list[Step], streams: list[list[str]] | None = None) -> None:
        self.steps, self.streams, self.sent, self.opened = list(steps), list(streams or []), [], []
        self.timeouts: list[float] = []

    def send(self, req: Request, headers: Mapping[str, str], timeout: float) -> Response:
        self.sent.append(req)
        self.timeouts.append(timeout)
        return self.steps.pop(0)(req)

    def stream(self, req: Request, headers: Mapping[str, str], timeout: float) -> Any:
        self.opened.append(req)
        if not self.streams:
            raise eskv.TransportError("no more streams")
        return FakeStream(self.streams.pop(0))

    def close(self) -> None:
        pass


def body(req: Request) -> dict[str, Any]:
    """A request's JSON body."""
    return json.loads(req.body or b"{}")  # type: ignore[no-any-return]


def change(cursor: str, key: str, version: int) -> list[str]:
    """The SSE lines of one change."""
    return ["event: change", f"id: {cursor}", "data: " + json.dumps({"cursor": cursor, "key": key, "version": version}), ""]


class TestSyncRetries(unittest.TestCase):
    """The sync client's retry policy over a fake transport."""

    def client(self, steps: list[Step], streams: list[list[str]] | None = None) -> tuple[eskv.Client, FakeTransport, list[float]]:
        t, sleeps = FakeTransport(steps, streams), []
        return eskv.Client("http://x", "tok", transport=t, sleep=sleeps.append), t, sleeps

    def test_write_retried_with_the_same_request_id(self) -> None:
        c, t, sleeps = self.client([drop, err(503, "outcome_unknown"), ok({"version": 1}, **{"eskv-replayed": "true"})])
        a = c.put("tenant/a/project/b/k", {"n": 1})
        self.assertTrue(a.replayed)
        ids = {body(r)["requestId"] for r in t.sent}
        self.assertEqual((len(t.sent), len(ids)), (3, 1))
        self.assertEqual(len(sleeps), 2)

    def test_two_writes_have_two_request_ids(self) -> None:
        c, t, _ = self.client([ok({"version": 1}), ok({"version": 2})])
        c.put("tenant/a/project/b/k", 1)
        c.put("tenant/a/project/b/k", 1)
        self.assertNotEqual(body(t.sent[0])["requestId"], body(t.sent[1])["requestId"])

    def test_escalates_after_five_tries(self) -> None:
        c, t, sleeps = self.client([err(503, "partition_unavailable")] * 5)
        with self.assertRaises(eskv.EscalationError) as cm:
            c.get("tenant/a/project/b/k")
        self.assertEqual((cm.exception.attempts, len(t.sent), len(sleeps)), (5, 5, 4))
        self.assertIsInstance(cm.exception.last, eskv.PartitionUnavailable)

    def test_429_waits_retry_after(self) -> None:
        c, _, sleeps = self.client([err(429, "too_many_requests", retry_after=3), ok({"items": []})])
        c.list("tenant/a/project/b/")
        self.assertEqual(sleeps, [3.0])

    def test_fatal_at_once(self) -> None:
        for step, cls in ((err(404, "not_found"), eskv.NotFound), (err(409, "lock_held"), eskv.LockHeld),
                          (err(409, "version_conflict", currentVersion=4), eskv.VersionConflict),
                          (err(400, "invalid", field="key"), eskv.Invalid), (err(500, "internal"), eskv.Internal)):
            c, t, sleeps = self.client([step])
            with self.assertRaises(cls):
                c.put("tenant/a/project/b/k", 1, expected_version=3)
            self.assertEqual((len(t.sent), sleeps), (1, []))

    def test_delete_range_is_not_retried(self) -> None:
        c, t, _ = self.client([drop])
        with self.assertRaises(eskv.TransportError):
            c.delete_range("tenant/a/project/b/")
        self.assertEqual(len(t.sent), 1)

    def test_attempt_timeout_bounds_each_try(self) -> None:
        c, t, _ = self.client([ok({})])
        c.policy.attempt_timeout = 1.5
        c.version()
        self.assertEqual(t.timeouts, [1.5])

    def test_update_backs_off_on_conflicts(self) -> None:
        conflict = err(409, "version_conflict", currentVersion=2)
        steps = [ok({"value": 1, "version": 1}), conflict, ok({"value": 5, "version": 2}), conflict,
                 ok({"value": 6, "version": 3}), ok({"value": 7, "version": 4})]
        c, t, sleeps = self.client(steps)
        got = c.update("tenant/a/project/b/n", lambda v: v + 1)
        self.assertEqual(got["version"], 4)
        self.assertEqual(sleeps, [1.0, 2.0])
        puts = [body(r) for r in t.sent if r.method == "PUT"]
        self.assertEqual([(p["value"], p["expectedVersion"]) for p in puts], [(2, 1), (6, 2), (7, 3)])

    def test_update_escalates_after_the_32_s_wait(self) -> None:
        conflict = err(409, "version_conflict", currentVersion=2)
        steps: list[Step] = []
        for _ in range(7):
            steps += [err(404, "not_found"), conflict]
        c, _, sleeps = self.client(steps)
        with self.assertRaises(eskv.EscalationError):
            c.update("tenant/a/project/b/n", lambda v: 1)
        self.assertEqual(sleeps, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0])

    def test_watch_resumes_after_its_last_cursor(self) -> None:
        p = "tenant/a/project/b/"
        streams = [[": ping", ""] + change("p1.o3", p + "k1", 1) + change("p1.o5", p + "k2", 1),
                   change("p1.o7", p + "k3", 1)]
        c, t, sleeps = self.client([], streams)
        w = c.watch(p, after="p1.o1")
        got = [next(w)["key"] for _ in range(3)]
        w.close()
        self.assertEqual(got, [p + "k1", p + "k2", p + "k3"])
        self.assertIn(("after", "p1.o1"), t.opened[0].query)
        self.assertIn(("after", "p1.o5"), t.opened[1].query)
        self.assertEqual(len(sleeps), 0)  # the watch waits on its own event, not the client's sleep

    def test_watch_raises_fatal_end(self) -> None:
        end = json.dumps({"error": {"code": "cursor_expired", "message": "gone"}})
        c, _, _ = self.client([], [["event: error", "data: " + end, ""]])
        with self.assertRaises(eskv.CursorExpired):
            next(c.watch("tenant/a/project/b/", after="p1.o1"))


class TestLease(unittest.TestCase):
    """The lock keep-alive over a fake transport."""

    def test_extends_then_reports_loss(self) -> None:
        lock = {"key": "k", "holder": "h", "token": 5, "version": 5}
        t = FakeTransport([ok(lock), ok(lock), err(409, "not_lock_holder")])
        c = eskv.Client("http://x", transport=t)
        with self.assertRaises(eskv.LeaseLost):
            with c.lock("tenant/a/project/b/lock", "h", ttl=3) as lease:
                self.assertTrue(lease.lost.wait(8))
                self.assertIsInstance(lease.error.__cause__, eskv.NotLockHolder)  # type: ignore[union-attr]
        self.assertEqual([r.path.rsplit(":", 1)[1] for r in t.sent], ["acquire", "extend", "extend"])

    def test_new_token_is_a_loss(self) -> None:
        t = FakeTransport([ok({"token": 5}), ok({"token": 9})])
        c = eskv.Client("http://x", transport=t)
        with self.assertRaises(eskv.LeaseLost):
            with c.lock("tenant/a/project/b/lock", "h", ttl=3) as lease:
                self.assertTrue(lease.lost.wait(5))
                self.assertIn("token is 9", str(lease.error))

    def test_released_at_the_end(self) -> None:
        t = FakeTransport([ok({"token": 5}), ok({"released": True})])
        c = eskv.Client("http://x", transport=t)
        with c.lock("tenant/a/project/b/lock", "h", ttl=30) as lease:
            self.assertFalse(lease.lost.is_set())
        self.assertEqual([r.path.rsplit(":", 1)[1] for r in t.sent], ["acquire", "release"])


class AsyncFake:
    """The async face of a FakeTransport."""

    def __init__(self, fake: FakeTransport) -> None:
        self.fake = fake

    async def send(self, req: Request, headers: Mapping[str, str], timeout: float) -> Response:
        return self.fake.send(req, headers, timeout)

    async def stream(self, req: Request, headers: Mapping[str, str], timeout: float) -> Any:
        s = self.fake.stream(req, headers, timeout)

        class S:
            async def lines(self) -> Any:
                for line in s.lines():
                    yield line

            def close(self) -> None:
                pass
        return S()

    async def close(self) -> None:
        pass


class TestAsyncClient(unittest.IsolatedAsyncioTestCase):
    """AsyncClient has the same methods and policy."""

    def test_same_methods(self) -> None:
        sync = {n for n in dir(eskv.Client) if not n.startswith("_")}
        aio = {n for n in dir(eskv.AsyncClient) if not n.startswith("_")}
        self.assertEqual(sync, aio)

    async def test_retry_and_watch(self) -> None:
        p = "tenant/a/project/b/"
        fake = FakeTransport([drop, ok({"version": 1})], [change("p1.o3", p + "k1", 1), change("p1.o4", p + "k2", 1)])
        sleeps: list[float] = []

        async def sleep(s: float) -> None:
            sleeps.append(s)
        c = eskv.AsyncClient("http://x", transport=AsyncFake(fake), sleep=sleep)
        await c.put(p + "k", 1)
        self.assertEqual(len({body(r)["requestId"] for r in fake.sent}), 1)
        w = c.watch(p, after="p1.o1")
        got = [(await w.__anext__())["key"], (await w.__anext__())["key"]]
        await w.aclose()
        self.assertEqual(got, [p + "k1", p + "k2"])
        self.assertIn(("after", "p1.o3"), fake.opened[1].query)


class Handler(http.server.BaseHTTPRequestHandler):
    """A local server: /chunked answers a chunked body, /close closes
    without an answer, /refuse answers 413 without reading the body (as
    eskv does to a body over its limit) and closes, /silent reads a body
    without saying 100 Continue first, anything else echoes the request
    as JSON (with its Expect header)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def _refuse(self) -> None:
        out = json.dumps({"error": {"code": "value_too_large", "message": "too large", "field": "value"}}).encode()
        self.send_response(413)
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(out)
        self.close_connection = True

    def handle_expect_100(self) -> bool:
        if self.path == "/refuse":
            self._refuse()
            return False
        if self.path == "/silent":
            return True
        return super().handle_expect_100()

    def _any(self) -> None:
        if self.path == "/refuse":
            self._refuse()
            return
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n)
        if self.path == "/close":
            self.close_connection = True
            return
        if self.path == "/quiet-close":  # answers, then closes without saying so
            self.close_connection = True
        if self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b'{"a":', b'1}'):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        out = json.dumps({"method": self.command, "path": self.path, "body": data.decode(),
                          "auth": self.headers.get("Authorization"), "port": self.client_address[1],
                          "expect": self.headers.get("Expect")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_PUT = do_POST = do_DELETE = _any


class TestTransports(unittest.IsolatedAsyncioTestCase):
    """Both transports against a local HTTP/1.1 server."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = f"http://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.shutdown()
        cls.server.server_close()

    def test_sync_keep_alive_and_chunked(self) -> None:
        t = HTTPTransport(self.url)
        a = json.loads(t.send(Request("PUT", "/x", body=b'{"v":1}'), {"Authorization": "Bearer t"}, 5).body)
        b = json.loads(t.send(Request("GET", "/y"), {}, 5).body)
        self.assertEqual((a["method"], a["body"], a["auth"]), ("PUT", '{"v":1}', "Bearer t"))
        self.assertEqual(a["port"], b["port"])  # one kept-alive connection
        self.assertEqual(t.send(Request("GET", "/chunked"), {}, 5).body, b'{"a":1}')
        with self.assertRaises(eskv.TransportError):
            t.send(Request("POST", "/close", retry=False), {}, 5)
        t.close()

    async def test_async_keep_alive_and_chunked(self) -> None:
        t = AsyncTransport(self.url)
        a = json.loads((await t.send(Request("PUT", "/x", body=b'{"v":1}'), {"Authorization": "Bearer t"}, 5)).body)
        b = json.loads((await t.send(Request("GET", "/y"), {}, 5)).body)
        self.assertEqual((a["method"], a["body"], a["auth"]), ("PUT", '{"v":1}', "Bearer t"))
        self.assertEqual(a["port"], b["port"])
        self.assertEqual((await t.send(Request("GET", "/chunked"), {}, 5)).body, b'{"a":1}')
        with self.assertRaises(eskv.TransportError):
            await t.send(Request("POST", "/close", retry=False), {}, 5)
        s = await t.stream(Request("GET", "/chunked"), {}, 5)
        self.assertEqual([line async for line in s.lines()], ['{"a":1}'])  # type: ignore[union-attr]
        s.close()  # type: ignore[union-attr]
        await t.close()

    def test_sync_replaces_a_connection_closed_while_idle(self) -> None:
        t = HTTPTransport(self.url)
        first = json.loads(t.send(Request("GET", "/quiet-close"), {}, 5).body)
        time.sleep(0.1)
        again = json.loads(t.send(Request("GET", "/y"), {}, 5).body)  # safe to repeat: a new connection
        self.assertNotEqual(first["port"], again["port"])
        t.send(Request("GET", "/quiet-close"), {}, 5)
        time.sleep(0.1)
        with self.assertRaises(eskv.TransportError):  # not safe to repeat: the caller decides
            t.send(Request("POST", "/y", body=b"{}", retry=False), {}, 5)
        t.close()

    async def test_async_replaces_a_connection_closed_while_idle(self) -> None:
        t = AsyncTransport(self.url)
        first = json.loads((await t.send(Request("GET", "/quiet-close"), {}, 5)).body)
        await asyncio.sleep(0.1)
        again = json.loads((await t.send(Request("GET", "/y"), {}, 5)).body)
        self.assertNotEqual(first["port"], again["port"])
        await t.send(Request("GET", "/quiet-close"), {}, 5)
        await asyncio.sleep(0.1)
        with self.assertRaises(eskv.TransportError):
            await t.send(Request("POST", "/y", body=b"{}", retry=False), {}, 5)
        await t.close()

    # A body above EXPECT_CONTINUE_BYTES (16 MiB here: more than any socket
    # buffer holds, so a server that answers and closes without reading it
    # resets a client that sends it whole).
    LARGE = b'"' + b"x" * (16 << 20) + b'"'

    def test_sync_asks_before_a_large_body(self) -> None:
        t = HTTPTransport(self.url)
        refused = t.send(Request("PUT", "/refuse", body=self.LARGE, retry=False), {}, 5)
        self.assertEqual(refused.status, 413)  # its answer, not a reset
        self.assertIn(b"value_too_large", refused.body)
        for path in ("/continue", "/silent"):  # 100 Continue, or nothing said for a second: the body goes
            a = json.loads(t.send(Request("PUT", path, body=self.LARGE), {"Authorization": "Bearer t"}, 5).body)
            self.assertEqual((a["path"], len(a["body"]), a["expect"], a["auth"]),
                             (path, len(self.LARGE), "100-continue", "Bearer t"))
        small = json.loads(t.send(Request("PUT", "/x", body=b"{}"), {}, 5).body)
        self.assertIsNone(small["expect"])  # small bodies go at once
        self.assertEqual(small["port"], a["port"])  # on the kept-alive connection
        t.close()

    async def test_async_asks_before_a_large_body(self) -> None:
        t = AsyncTransport(self.url)
        refused = await t.send(Request("PUT", "/refuse", body=self.LARGE, retry=False), {}, 5)
        self.assertEqual(refused.status, 413)
        self.assertIn(b"value_too_large", refused.body)
        for path in ("/continue", "/silent"):
            a = json.loads((await t.send(Request("PUT", path, body=self.LARGE), {"Authorization": "Bearer t"}, 5)).body)
            self.assertEqual((a["path"], len(a["body"]), a["expect"], a["auth"]),
                             (path, len(self.LARGE), "100-continue", "Bearer t"))
        small = json.loads((await t.send(Request("PUT", "/x", body=b"{}"), {}, 5)).body)
        self.assertIsNone(small["expect"])
        self.assertEqual(small["port"], a["port"])
        await t.close()

    def test_refused_is_transport_error(self) -> None:
        c = eskv.Client("http://127.0.0.1:1", policy=eskv.RetryPolicy(attempts=2, min_wait=0.01))
        start = time.monotonic()
        with self.assertRaises(eskv.EscalationError) as cm:
            c.get("tenant/a/project/b/k")
        self.assertIsInstance(cm.exception.last, eskv.TransportError)
        self.assertLess(time.monotonic() - start, 5)


class TestTLS(unittest.IsolatedAsyncioTestCase):
    """https with a CA file: trusted with it, refused at once without (a
    certificate the client does not trust is not retried). The server's
    certificate is made with the openssl command for 127.0.0.1."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir = tempfile.TemporaryDirectory()
        cert, key = os.path.join(cls.dir.name, "cert.pem"), os.path.join(cls.dir.name, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        cls.cert = cert
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        cls.server.socket = ctx.wrap_socket(cls.server.socket, server_side=True)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = f"https://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.shutdown()
        cls.server.server_close()
        cls.dir.cleanup()

    def test_sync(self) -> None:
        with eskv.Client(self.url, "t", ca_file=self.cert) as c:
            self.assertEqual(c.version()["method"], "GET")
        sleeps: list[float] = []
        with eskv.Client(self.url, "t", sleep=sleeps.append) as c, self.assertRaises(eskv.UntrustedCertificate):
            c.version()
        self.assertEqual(sleeps, [])
        t = HTTPTransport(self.url, ca_file=self.cert)  # a large body asks first over TLS too
        self.assertEqual(t.send(Request("PUT", "/refuse", body=TestTransports.LARGE, retry=False), {}, 5).status, 413)
        a = json.loads(t.send(Request("PUT", "/continue", body=TestTransports.LARGE), {}, 5).body)
        self.assertEqual((len(a["body"]), a["expect"]), (len(TestTransports.LARGE), "100-continue"))
        t.close()

    async def test_async(self) -> None:
        async with eskv.AsyncClient(self.url, "t", ca_file=self.cert) as c:
            self.assertEqual((await c.version())["auth"], "Bearer t")
        async with eskv.AsyncClient(self.url, "t") as c:
            with self.assertRaises(eskv.UntrustedCertificate):
                await c.version()
        t = AsyncTransport(self.url, ca_file=self.cert)
        refused = await t.send(Request("PUT", "/refuse", body=TestTransports.LARGE, retry=False), {}, 5)
        self.assertEqual(refused.status, 413)
        a = json.loads((await t.send(Request("PUT", "/continue", body=TestTransports.LARGE), {}, 5)).body)
        self.assertEqual((len(a["body"]), a["expect"]), (len(TestTransports.LARGE), "100-continue"))
        await t.close()


if __name__ == "__main__":
    unittest.main()
