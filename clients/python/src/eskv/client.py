"""The synchronous client: :class:`Client` over ``http.client`` with
keep-alive (one connection per thread), its resuming :class:`Watch` and
the lock keep-alive :class:`Lease`."""

from __future__ import annotations

import http.client
import io
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Iterator, Mapping

from . import ops
from ._core import (Answer, Call, Request, Response, RetryPolicy, Retrier, SSEParser, WatchEnded, WatchState,
                    handle, lease_transient, request_headers, watch_transient)
from ._methods import SyncMethods
from .errors import (EscalationError, EskvError, Invalid, LeaseLost, NotFound, TransportError, UntrustedCertificate,
                     VersionConflict)

#: How long a watch stream may stay silent (the server pings every 15 s).
WATCH_IDLE_TIMEOUT = 45.0

#: Bodies above this many bytes ask the server first (``Expect:
#: 100-continue``, as curl and the Go client do above 1 MiB): a body the
#: server refuses (413 value_too_large over its body limit, 429 over a
#: principal's share of body bytes) is then answered before it is sent,
#: instead of sent in full to a server that has answered already and
#: closes, which reaches the client as a broken pipe or a reset in place
#: of the answer.
EXPECT_CONTINUE_BYTES = 1 << 20

#: How long a request that asked first waits for the server's word before
#: it sends its body anyway (a server or proxy that ignores ``Expect``).
EXPECT_CONTINUE_TIMEOUT = 1.0


class BaseURL:
    """A parsed base URL: scheme, host, port and path prefix."""

    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise Invalid(f"base URL {url!r} is not http(s)://host[:port]", detail={"field": "base_url"})
        self.scheme, self.host = u.scheme, u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path
        self.url = url.rstrip("/")


class StreamResponse:
    """An open streaming answer: its lines, and close() from any thread."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn, self._resp = conn, resp

    def lines(self) -> Iterator[str]:
        """The stream's lines (decoded, line breaks kept) until it ends."""
        while True:
            try:
                line = self._resp.readline(4 << 20)
            except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
                # AttributeError: http.client's response closed under the read.
                raise WatchEnded(f"the watch stream broke: {e!r}") from e
            if not line:
                return
            yield line.decode("utf-8", "replace")

    def close(self) -> None:
        """End the stream from any thread: a blocked read returns; the
        reader releases the connection (release)."""
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def release(self) -> None:
        """Close the connection: by the reading thread, once done."""
        self.close()
        self._conn.close()


class _Prefetched:
    """A socket stand-in for ``http.client.HTTPResponse`` whose answer's
    first line was read already (``line``), the rest to come from ``fp``."""

    def __init__(self, line: bytes, fp: io.BufferedIOBase) -> None:
        self._line, self._fp = line, fp

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_Chain(self._line, self._fp))


class _Chain(io.RawIOBase):
    """Reads ``first``, then ``rest``."""

    def __init__(self, first: bytes, rest: io.BufferedIOBase) -> None:
        self._first, self._rest = first, rest

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._rest.close()  # the socket's file, not the socket: the connection is dropped apart
        super().close()

    def readinto(self, b: Any) -> int:
        if self._first:
            n = min(len(b), len(self._first))
            b[:n], self._first = self._first[:n], self._first[n:]
            return n
        data = self._rest.read1(len(b))
        b[:len(data)] = data
        return len(data)


class HTTPTransport:
    """Sends requests over ``http.client`` keep-alive connections, one per
    thread; https with the system's roots or ``ca_file``."""

    def __init__(self, base_url: str, ca_file: str | None = None) -> None:
        self.base = BaseURL(base_url)
        self._ssl = ssl.create_default_context(cafile=ca_file) if self.base.scheme == "https" else None
        self._local = threading.local()
        self._conns: set[http.client.HTTPConnection] = set()
        self._mu = threading.Lock()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        """A new connection to the server."""
        if self._ssl is not None:
            return http.client.HTTPSConnection(self.base.host, self.base.port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self.base.host, self.base.port, timeout=timeout)

    def send(self, req: Request, headers: Mapping[str, str], timeout: float) -> Response:
        """One try of req: its whole answer, or TransportError. A kept-alive
        connection the server closed meanwhile is replaced once, when req is
        safe to repeat."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        reused = conn is not None
        for _ in range(2):
            if conn is None:
                conn = self._connect(timeout)
                with self._mu:
                    self._conns.add(conn)
            self._local.conn = conn
            try:
                return self._exchange(conn, req, headers, timeout)
            except (OSError, http.client.HTTPException) as e:
                self._drop(conn)
                conn = None
                stale = isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError))
                if reused and stale and req.retry:
                    reused = False
                    continue
                if isinstance(e, ssl.SSLCertVerificationError):
                    raise UntrustedCertificate(f"{self.base.url}: {e}") from e
                raise TransportError(f"{req.method} {self.base.url}{req.target()}: {e!r}") from e
        raise TransportError("unreachable")  # pragma: no cover

    def _exchange(self, conn: http.client.HTTPConnection, req: Request, headers: Mapping[str, str],
                  timeout: float) -> Response:
        """Write req on conn and read its answer."""
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        if req.body is not None and len(req.body) > EXPECT_CONTINUE_BYTES:
            resp = self._ask_first(conn, req, headers, min(timeout, EXPECT_CONTINUE_TIMEOUT))
        else:
            conn.request(req.method, self.base.prefix + req.target(), body=req.body, headers=dict(headers))
            resp = conn.getresponse()
        body = resp.read()
        if resp.will_close:
            self._drop(conn)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)

    def _ask_first(self, conn: http.client.HTTPConnection, req: Request, headers: Mapping[str, str],
                   wait: float) -> http.client.HTTPResponse:
        """Send req's head with ``Expect: 100-continue``, then its body once
        the server says 100 Continue or says nothing for ``wait`` seconds;
        a final answer that comes first is returned without the body ever
        sent (its connection is closed once read: the server did not read
        a body from it)."""
        conn.putrequest(req.method, self.base.prefix + req.target(), skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(req.body or b"")))
        conn.putheader("Expect", "100-continue")
        conn.endheaders()
        sock = conn.sock
        if sock is not None and select.select([sock], [], [], wait)[0]:
            fp = sock.makefile("rb")
            line = fp.readline(65537)
            if line.split(b" ", 2)[1:2] != [b"100"]:  # the final answer: the body is not wanted
                resp = http.client.HTTPResponse(_Prefetched(line, fp), method=req.method)  # type: ignore[arg-type]
                resp.begin()
                resp.will_close = True
                return resp
            http.client.parse_headers(fp)  # the 100's header lines, to its blank line
            # Nothing else is on the wire until the body is sent: the next
            # reader (getresponse's) misses nothing fp may have buffered.
            fp.close()
        conn.send(req.body or b"")
        return conn.getresponse()

    def stream(self, req: Request, headers: Mapping[str, str], timeout: float) -> StreamResponse | Response:
        """Open a streaming request on a connection of its own: the open
        stream on 200, else the whole (error) answer."""
        conn = self._connect(timeout)
        try:
            conn.request(req.method, self.base.prefix + req.target(), headers=dict(headers))
            resp = conn.getresponse()
            if resp.status != 200:
                body = resp.read()
                conn.close()
                return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            if isinstance(e, ssl.SSLCertVerificationError):
                raise UntrustedCertificate(f"{self.base.url}: {e}") from e
            raise TransportError(f"GET {self.base.url}{req.target()}: {e!r}") from e
        return StreamResponse(conn, resp)

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        """Close conn and forget it."""
        conn.close()
        self._local.conn = None
        with self._mu:
            self._conns.discard(conn)

    def close_local(self) -> None:
        """Close the calling thread's connection (a thread that ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._drop(conn)

    def close(self) -> None:
        """Close every thread's kept-alive connection (a thread's next call
        opens a new one)."""
        with self._mu:
            conns, self._conns = self._conns, set()
        for conn in conns:
            conn.close()
        self._local.conn = None


class Client(SyncMethods):
    """A client of one eskv HTTP API with one bearer token, safe for use by
    several threads (each keeps its own connection).

    Every method builds its request with the sans-IO core and sends it with
    the retry policy (:class:`RetryPolicy`): reads and writes (each write
    carries a request id, the caller's or a new one, reused by its
    retries) are retried on transient errors, up to 5 tries with jittered
    backoff honouring Retry-After; conflicts only by :meth:`update`.
    """

    def __init__(self, base_url: str, token: str | None = None, *, ca_file: str | None = None,
                 policy: RetryPolicy | None = None, directive: str | None = None,
                 user_agent: str = "eskv-python-client", transport: Any = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.transport = transport if transport is not None else HTTPTransport(base_url, ca_file)
        self.policy = policy or RetryPolicy()
        self._token, self._directive, self._ua, self._sleep = token, directive, user_agent, sleep

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the kept-alive connections."""
        self.transport.close()

    def headers(self, req: Request) -> dict[str, str]:
        """The headers of req: token, content type, user agent, directive."""
        return request_headers(req, self._token, self._ua, self._directive)

    def once(self, call: Call[Any], timeout: float | None = None, request: Request | None = None) -> Any:
        """One try of call (or of request, a try of it), without retries."""
        req = request or call.request
        t = self.policy.attempt_timeout if timeout is None else timeout
        return handle(self.transport.send(req, self.headers(req), t), call.parse)

    def _call(self, call: Call[Answer]) -> Answer:
        """Send call with the retry policy."""
        r = Retrier(self.policy, call.request.retry, wait=call.request.wait)
        while True:
            req, extra = r.request(call.request)
            try:
                return self.once(call, self.policy.attempt_timeout + extra, req)  # type: ignore[no-any-return]
            except EskvError as e:
                self._sleep(r.after(e))

    def update(self, key: str, fn: Callable[[Any], Any], *, ttl: int | None = None) -> Answer:
        """Read-modify-write: put ``fn(current value)`` (None when absent) as a
        compare-and-swap on the version read; on a version conflict read
        again after the conflict backoff (1, 2, 4 ... 32 s), then escalate."""
        sched = self.policy.conflict()
        attempt = 0
        while True:
            try:
                e = self.get(key)
                cur, ver = e.get("value"), int(e["version"])
            except NotFound:
                cur, ver = None, 0
            try:
                return self.put(key, fn(cur), expected_version=ver, ttl=ttl)
            except VersionConflict as err:
                if err.field == "requestId":
                    raise
                attempt += 1
                wait = sched.next()
                if wait is None:
                    raise EscalationError(attempt, err) from err
                if self.policy.on_retry is not None:
                    self.policy.on_retry(err, attempt, wait)
                self._sleep(wait)

    def list_all(self, prefix: str, *, limit: int | None = None, keys_only: bool = False) -> Iterator[Answer]:
        """Every live entry (or key) under prefix, page after page, all pages
        one snapshot (the first page's position)."""
        cursor: str | None = None
        while True:
            page = self._call(ops.list_page(prefix, limit=limit, cursor=cursor, keys_only=keys_only))
            for item in page.get("items") or []:
                yield Answer(item)
            cursor = page.get("nextCursor")
            if not page.get("truncated") or not cursor:
                return

    def watch(self, prefix: str = "", *, key: str = "", after: str = "", from_version: int = 0) -> "Watch":
        """A resuming watch of a prefix (or one key): iterate it for change
        events; it reconnects after its last cursor by itself."""
        return Watch(self, WatchState(prefix, key, after, from_version))

    def lock(self, key: str, holder: str, ttl: int = 60) -> "Lease":
        """A lock kept alive while the ``with`` block runs: ``with
        client.lock(key, holder, ttl) as lease:`` acquires, extends every
        ttl/3 in a background thread, sets ``lease.lost`` on loss (and the
        block's end raises LeaseLost), and releases at the end."""
        return Lease(self, key, holder, ttl)

    def leadership(self, key: str, holder: str, ttl: int = 60) -> "Lease":
        """As :meth:`lock` for a leader pool (elect, heartbeat, resign)."""
        return Lease(self, key, holder, ttl, verbs=("elect", "heartbeat", "resign"))


class Watch:
    """A resuming watch: an iterator of change events (dicts with ``cursor``,
    ``key``, ``version``, ``kind``, ``op``, ``value``...). After a dropped
    stream, a writer restart, 503 or slow_consumer it reconnects after the
    last cursor it saw, so it yields no gap and no duplicate; fatal errors
    (400, 403, 410 cursor_expired) are raised. ``close()`` ends it (from
    any thread)."""

    def __init__(self, client: Client, state: WatchState) -> None:
        self._client, self._state = client, state
        self._closed = threading.Event()
        self._stream: StreamResponse | None = None
        self._gen = self._run()

    @property
    def cursor(self) -> str:
        """The cursor the watch resumes after."""
        return self._state.cursor

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self._gen)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watch; a pending iteration ends."""
        self._closed.set()
        if self._stream is not None:
            self._stream.close()
        try:
            self._gen.close()  # suspended between changes: release its connection now
        except ValueError:  # being iterated in another thread, which the closed stream ends
            pass

    def _run(self) -> Iterator[dict[str, Any]]:
        """Connections after connections, yielding their changes."""
        c = self._client
        waits = c.policy.waits()
        while not self._closed.is_set():
            try:
                for change in self._connection():
                    waits = c.policy.waits()
                    yield change
                    if self._closed.is_set():
                        return
            except EskvError as e:
                if self._closed.is_set():
                    return
                if not watch_transient(e):
                    raise
                wait = max(waits.next() or 0.0, e.retry_after)
                if c.policy.on_retry is not None:
                    c.policy.on_retry(e, 0, wait)
                if self._closed.wait(wait):
                    return

    def _connection(self) -> Iterator[dict[str, Any]]:
        """One connection's changes; its end is an error."""
        req = self._state.request()
        got = self._client.transport.stream(req, self._client.headers(req), WATCH_IDLE_TIMEOUT)
        if isinstance(got, Response):
            handle(got, lambda r: None)
            raise WatchEnded("the watch answered without a stream")
        self._stream = got
        try:
            parser = SSEParser()
            for line in got.lines():
                ev = parser.feed(line)
                if ev is not None:
                    change = self._state.on_event(ev)
                    if change is not None:
                        yield change
            raise WatchEnded("the watch stream ended")
        finally:
            self._stream = None
            got.release()


class Lease:
    """A lock (or leadership) kept alive by a background thread while a
    ``with`` block runs. ``lost`` is set when it is lost — a renewal
    refused (NotLockHolder: broken or taken over), a new token, or no
    renewal got through before its end — and ``error`` says why;
    :meth:`check` and the block's end raise it (:class:`LeaseLost`)."""

    def __init__(self, client: Client, key: str, holder: str, ttl: int,
                 verbs: tuple[str, str, str] = ("acquire", "extend", "release")) -> None:
        if ttl < 1:
            raise Invalid("ttl must be at least 1 s", detail={"field": "ttlSeconds"})
        self.client, self.key, self.holder, self.ttl, self.verbs = client, key, holder, ttl, verbs
        self.lost = threading.Event()
        self.error: LeaseLost | None = None
        self.token = 0
        self.answer: Answer | None = None
        self._stop = threading.Event()
        self._end = 0.0
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Lease":
        sent = time.monotonic()
        self.answer = self.client._call(ops.lock_op(self.key, self.verbs[0], self.holder, ttl=self.ttl))
        self.token, self._end = int(self.answer["token"]), sent + self.ttl
        self._thread = threading.Thread(target=self._keep, name=f"eskv-lease-{self.key}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            if exc_type is None:
                raise self.error
            return
        try:
            self.client._call(ops.lock_op(self.key, self.verbs[2], self.holder))
        except EskvError:
            if exc_type is None:
                raise

    def check(self) -> None:
        """Raise LeaseLost when the lease was lost."""
        if self.error is not None:
            raise self.error

    def _keep(self) -> None:
        """Renew every ttl/3 until stopped or lost; then close the thread's
        connection."""
        every = self.ttl / 3
        try:
            while not self._stop.wait(max(self._end - self.ttl + every - time.monotonic(), 0)):
                err = self._renew_once(every)
                if err is not None:
                    self.error = err
                    self.lost.set()
                    return
        finally:
            close_local = getattr(self.client.transport, "close_local", None)
            if close_local is not None:
                close_local()

    def _renew_once(self, margin: float) -> LeaseLost | None:
        """One renewal, retrying transient errors until margin before the
        lease's end; the loss, if any."""
        waits = self.client.policy.waits()
        last: EskvError | None = None
        while not self._stop.is_set():
            left = self._end - margin - time.monotonic()
            if left <= 0:
                return _lost(self.key, "no renewal got through before it ended", last)
            sent = time.monotonic()
            try:
                got = self.client.once(ops.lock_op(self.key, self.verbs[1], self.holder, ttl=self.ttl),
                                       timeout=min(left, self.client.policy.attempt_timeout))
            except EskvError as e:
                if not lease_transient(e):
                    return _lost(self.key, "the server refused its renewal", e)
                last = e
                self._stop.wait(min(max(waits.next() or 0.0, e.retry_after), max(left, 0)))
                continue
            if int(got["token"]) != self.token:
                return _lost(self.key, f"the token is {got['token']} now, not {self.token}", None)
            self.answer, self._end = got, sent + self.ttl
            return None
        return None


def _lost(key: str, why: str, cause: EskvError | None) -> LeaseLost:
    """The LeaseLost error of key."""
    err = LeaseLost(f"lease of {key} lost: {why}" + (f": {cause}" if cause else ""))
    err.__cause__ = cause
    return err
