"""The asyncio client: :class:`AsyncClient`, the same methods as
:class:`eskv.Client` as coroutines, over asyncio streams and a minimal
HTTP/1.1 (Content-Length and chunked bodies, keep-alive; no thread per
call), with its resuming :class:`AsyncWatch` and :class:`AsyncLease`."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from . import ops
from ._core import (Answer, Call, Request, Response, RetryPolicy, Retrier, SSEParser, WatchEnded, WatchState,
                    handle, lease_transient, request_headers, watch_transient)
from ._http11 import (MAX_LINE, ProtocolError, body_framing, chunk_size, keeps_alive, parse_header, parse_status,
                      request_head)
from ._methods import AsyncMethods
from .client import EXPECT_CONTINUE_BYTES, EXPECT_CONTINUE_TIMEOUT, WATCH_IDLE_TIMEOUT, BaseURL, _lost
from .errors import (EscalationError, EskvError, Invalid, LeaseLost, NotFound, TransportError, UntrustedCertificate,
                     VersionConflict)

_NET_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError)


class _Conn:
    """One connection: its reader and writer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        """Close it."""
        self.writer.close()


class _Body:
    """Reads one answer's body as its framing says, whole or line by line."""

    def __init__(self, conn: _Conn, framing: str, length: int) -> None:
        self.conn, self.framing, self.left = conn, framing, length
        self.buf, self.done = b"", framing == "none" or (framing == "length" and length == 0)

    async def _more(self) -> bytes:
        """The next piece of the body (b"" at its end)."""
        r = self.conn.reader
        if self.done:
            return b""
        if self.framing == "length":
            data = await r.read(min(self.left, 64 << 10))
            if not data:
                raise ProtocolError("the connection closed inside a body")
            self.left -= len(data)
            self.done = self.left == 0
            return data
        if self.framing == "chunked":
            n = chunk_size(await r.readuntil(b"\n"))
            if n == 0:
                while (await r.readuntil(b"\n")).strip():  # trailers
                    pass
                self.done = True
                return b""
            data = await r.readexactly(n + 2)
            return data[:-2]
        data = await r.read(64 << 10)
        self.done = not data
        return data

    async def read_all(self) -> bytes:
        """The whole body."""
        parts = [self.buf]
        while not self.done:
            parts.append(await self._more())
        self.buf = b""
        return b"".join(parts)

    async def readline(self) -> bytes:
        """The next line (with its break), b"" at the end."""
        while b"\n" not in self.buf:
            if len(self.buf) > (4 << 20):
                raise ProtocolError("a line of the stream is over 4 MiB")
            data = await self._more()
            if not data:
                line, self.buf = self.buf, b""
                return line
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line + b"\n"


class AsyncTransport:
    """Sends requests over a small pool of kept-alive asyncio connections."""

    def __init__(self, base_url: str, ca_file: str | None = None, pool: int = 8) -> None:
        self.base = BaseURL(base_url)
        self._ssl = ssl.create_default_context(cafile=ca_file) if self.base.scheme == "https" else None
        self._idle: list[_Conn] = []
        self._pool = pool
        self._host = self.base.host if self.base.port in (80, 443) else f"{self.base.host}:{self.base.port}"

    async def _open(self) -> _Conn:
        """A new connection."""
        r, w = await asyncio.open_connection(self.base.host, self.base.port, ssl=self._ssl, limit=MAX_LINE)
        return _Conn(r, w)

    async def _head(self, conn: _Conn, req: Request, headers: Mapping[str, str]) -> tuple[int, dict[str, str], bool]:
        """Write req, read the answer's status and headers; whether the body
        went. A body above EXPECT_CONTINUE_BYTES is sent once the server
        says 100 Continue, or says nothing for EXPECT_CONTINUE_TIMEOUT (as
        the sync client does: a body the server refuses is answered before
        it is sent, not met by a reset)."""
        # held back: the body, until the server's word or its silence
        held = req.body if req.body is not None and len(req.body) > EXPECT_CONTINUE_BYTES else None
        if held is not None:
            headers = {**headers, "Expect": "100-continue"}
        conn.writer.write(request_head(req.method, self.base.prefix + req.target(), self._host, headers,
                                       len(req.body) if req.body is not None else None))
        if held is None and req.body is not None:
            conn.writer.write(req.body)
        await conn.writer.drain()
        while True:
            try:
                line = await asyncio.wait_for(conn.reader.readuntil(b"\n"),
                                              EXPECT_CONTINUE_TIMEOUT if held is not None else None)
            except asyncio.TimeoutError:  # only while held (no timeout otherwise)
                line = b""  # nothing said: send it anyway
            if line:
                status = parse_status(line)
                hs: dict[str, str] = {}
                while (line := await conn.reader.readuntil(b"\n")).strip():
                    k, v = parse_header(line)
                    hs[k] = f"{hs[k]}, {v}" if k in hs else v
                if status != 100:
                    return status, hs, held is None
            if held is not None:  # 100 Continue, or silence
                conn.writer.write(held)
                await conn.writer.drain()
                held = None

    async def _exchange(self, conn: _Conn, req: Request, headers: Mapping[str, str]) -> tuple[Response, bool]:
        """One request and its whole answer; whether conn may be reused (not
        when the answer came before a body that was never sent)."""
        status, hs, sent = await self._head(conn, req, headers)
        framing, n = body_framing(req.method, status, hs)
        body = await _Body(conn, framing, n).read_all()
        return Response(status, hs, body), sent and keeps_alive(hs, framing)

    async def send(self, req: Request, headers: Mapping[str, str], timeout: float) -> Response:
        """One try of req; a pooled connection the server closed meanwhile is
        replaced once when req is safe to repeat."""
        for fresh in (False, True):
            reused = bool(self._idle) and not fresh
            try:
                conn = self._idle.pop() if reused else await asyncio.wait_for(self._open(), timeout)
            except ssl.SSLCertVerificationError as e:
                raise UntrustedCertificate(f"{self.base.url}: {e}") from e
            except _NET_ERRORS as e:
                raise TransportError(f"{req.method} {self.base.url}{req.target()}: {e!r}") from e
            try:
                resp, keep = await asyncio.wait_for(self._exchange(conn, req, headers), timeout)
            except _NET_ERRORS as e:
                conn.close()
                stale = isinstance(e, (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError))
                if reused and stale and req.retry:
                    continue
                raise TransportError(f"{req.method} {self.base.url}{req.target()}: {e!r}") from e
            except BaseException:
                conn.close()
                raise
            if keep and len(self._idle) < self._pool:
                self._idle.append(conn)
            else:
                conn.close()
            return resp
        raise TransportError("unreachable")  # pragma: no cover

    async def stream(self, req: Request, headers: Mapping[str, str], timeout: float) -> "AsyncStream | Response":
        """Open a streaming request on a connection of its own."""
        try:
            conn = await asyncio.wait_for(self._open(), timeout)
            status, hs, _ = await asyncio.wait_for(self._head(conn, req, headers), timeout)
            framing, n = body_framing(req.method, status, hs)
            body = _Body(conn, framing, n)
            if status != 200:
                data = await asyncio.wait_for(body.read_all(), timeout)
                conn.close()
                return Response(status, hs, data)
        except ssl.SSLCertVerificationError as e:
            raise UntrustedCertificate(f"{self.base.url}: {e}") from e
        except _NET_ERRORS as e:
            raise TransportError(f"GET {self.base.url}{req.target()}: {e!r}") from e
        return AsyncStream(conn, body, timeout)

    async def close(self) -> None:
        """Close the pooled connections."""
        while self._idle:
            self._idle.pop().close()


class AsyncStream:
    """An open streaming answer read line by line."""

    def __init__(self, conn: _Conn, body: _Body, idle: float) -> None:
        self.conn, self.body, self.idle = conn, body, idle

    async def lines(self) -> AsyncIterator[str]:
        """The stream's lines until it ends."""
        while True:
            try:
                line = await asyncio.wait_for(self.body.readline(), self.idle)
            except _NET_ERRORS as e:
                raise WatchEnded(f"the watch stream broke: {e!r}") from e
            if not line:
                return
            yield line.decode("utf-8", "replace")

    def close(self) -> None:
        """Close the stream's connection."""
        self.conn.close()


class AsyncClient(AsyncMethods):
    """The asyncio client: :class:`eskv.Client`'s methods as coroutines, the
    same retry policy and errors. Use it from one event loop."""

    def __init__(self, base_url: str, token: str | None = None, *, ca_file: str | None = None,
                 policy: RetryPolicy | None = None, directive: str | None = None,
                 user_agent: str = "eskv-python-client", transport: Any = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.transport = transport if transport is not None else AsyncTransport(base_url, ca_file)
        self.policy = policy or RetryPolicy()
        self._token, self._directive, self._ua, self._sleep = token, directive, user_agent, sleep

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the pooled connections."""
        await self.transport.close()

    def headers(self, req: Request) -> dict[str, str]:
        """The headers of req: token, content type, user agent, directive."""
        return request_headers(req, self._token, self._ua, self._directive)

    async def once(self, call: Call[Any], timeout: float | None = None, request: Request | None = None) -> Any:
        """One try of call (or of request, a try of it), without retries."""
        req = request or call.request
        t = self.policy.attempt_timeout if timeout is None else timeout
        return handle(await self.transport.send(req, self.headers(req), t), call.parse)

    async def _call(self, call: Call[Answer]) -> Answer:
        """Send call with the retry policy."""
        r = Retrier(self.policy, call.request.retry, wait=call.request.wait)
        while True:
            req, extra = r.request(call.request)
            try:
                return await self.once(call, self.policy.attempt_timeout + extra, req)  # type: ignore[no-any-return]
            except EskvError as e:
                await self._sleep(r.after(e))

    async def update(self, key: str, fn: Callable[[Any], Any], *, ttl: int | None = None) -> Answer:
        """Read-modify-write with the conflict backoff; see Client.update."""
        sched = self.policy.conflict()
        attempt = 0
        while True:
            try:
                e = await self.get(key)
                cur, ver = e.get("value"), int(e["version"])
            except NotFound:
                cur, ver = None, 0
            try:
                return await self.put(key, fn(cur), expected_version=ver, ttl=ttl)
            except VersionConflict as err:
                if err.field == "requestId":
                    raise
                attempt += 1
                wait = sched.next()
                if wait is None:
                    raise EscalationError(attempt, err) from err
                if self.policy.on_retry is not None:
                    self.policy.on_retry(err, attempt, wait)
                await self._sleep(wait)

    async def list_all(self, prefix: str, *, limit: int | None = None,
                       keys_only: bool = False) -> AsyncIterator[Answer]:
        """Every live entry (or key) under prefix, page after page."""
        cursor: str | None = None
        while True:
            page = await self._call(ops.list_page(prefix, limit=limit, cursor=cursor, keys_only=keys_only))
            for item in page.get("items") or []:
                yield Answer(item)
            cursor = page.get("nextCursor")
            if not page.get("truncated") or not cursor:
                return

    def watch(self, prefix: str = "", *, key: str = "", after: str = "", from_version: int = 0) -> "AsyncWatch":
        """A resuming watch: ``async for change in client.watch(prefix)``."""
        return AsyncWatch(self, WatchState(prefix, key, after, from_version))

    def lock(self, key: str, holder: str, ttl: int = 60) -> "AsyncLease":
        """``async with client.lock(key, holder, ttl) as lease:``; see Client.lock."""
        return AsyncLease(self, key, holder, ttl)

    def leadership(self, key: str, holder: str, ttl: int = 60) -> "AsyncLease":
        """As :meth:`lock` for a leader pool."""
        return AsyncLease(self, key, holder, ttl, verbs=("elect", "heartbeat", "resign"))


class AsyncWatch:
    """The async resuming watch; see :class:`eskv.Watch`."""

    def __init__(self, client: AsyncClient, state: WatchState) -> None:
        self._client, self._state = client, state
        self._closed = False
        self._stream: AsyncStream | None = None
        self._gen = self._run()

    @property
    def cursor(self) -> str:
        """The cursor the watch resumes after."""
        return self._state.cursor

    def __aiter__(self) -> "AsyncWatch":
        return self

    async def __anext__(self) -> dict[str, Any]:
        return await self._gen.__anext__()

    async def __aenter__(self) -> "AsyncWatch":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the watch; a pending iteration in another task ends."""
        self._closed = True
        if self._stream is not None:
            self._stream.close()
        try:
            await self._gen.aclose()
        except RuntimeError:  # another task is inside it: the closed stream ends it
            pass

    async def _run(self) -> AsyncIterator[dict[str, Any]]:
        """Connections after connections, yielding their changes."""
        c = self._client
        waits = c.policy.waits()
        while not self._closed:
            try:
                async for change in self._connection():
                    waits = c.policy.waits()
                    yield change
            except EskvError as e:
                if self._closed:
                    return
                if not watch_transient(e):
                    raise
                wait = max(waits.next() or 0.0, e.retry_after)
                if c.policy.on_retry is not None:
                    c.policy.on_retry(e, 0, wait)
                await c._sleep(wait)

    async def _connection(self) -> AsyncIterator[dict[str, Any]]:
        """One connection's changes; its end is an error."""
        req = self._state.request()
        got = await self._client.transport.stream(req, self._client.headers(req), WATCH_IDLE_TIMEOUT)
        if isinstance(got, Response):
            handle(got, lambda r: None)
            raise WatchEnded("the watch answered without a stream")
        self._stream = got
        try:
            parser = SSEParser()
            async for line in got.lines():
                ev = parser.feed(line)
                if ev is not None:
                    change = self._state.on_event(ev)
                    if change is not None:
                        yield change
            raise WatchEnded("the watch stream ended")
        finally:
            got.close()
            self._stream = None


class AsyncLease:
    """A lock (or leadership) kept alive by a task while an ``async with``
    block runs; ``lost`` (an asyncio.Event) and ``error`` as in :class:`eskv.Lease`."""

    def __init__(self, client: AsyncClient, key: str, holder: str, ttl: int,
                 verbs: tuple[str, str, str] = ("acquire", "extend", "release")) -> None:
        if ttl < 1:
            raise Invalid("ttl must be at least 1 s", detail={"field": "ttlSeconds"})
        self.client, self.key, self.holder, self.ttl, self.verbs = client, key, holder, ttl, verbs
        self.lost = asyncio.Event()
        self.error: LeaseLost | None = None
        self.token = 0
        self.answer: Answer | None = None
        self._end = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "AsyncLease":
        sent = time.monotonic()
        self.answer = await self.client._call(ops.lock_op(self.key, self.verbs[0], self.holder, ttl=self.ttl))
        self.token, self._end = int(self.answer["token"]), sent + self.ttl
        self._task = asyncio.create_task(self._keep())
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.error is not None:
            if exc_type is None:
                raise self.error
            return
        try:
            await self.client._call(ops.lock_op(self.key, self.verbs[2], self.holder))
        except EskvError:
            if exc_type is None:
                raise

    def check(self) -> None:
        """Raise LeaseLost when the lease was lost."""
        if self.error is not None:
            raise self.error

    async def _keep(self) -> None:
        """Renew every ttl/3 until cancelled or lost."""
        every = self.ttl / 3
        while True:
            await asyncio.sleep(max(self._end - self.ttl + every - time.monotonic(), 0))
            err = await self._renew_once(every)
            if err is not None:
                self.error = err
                self.lost.set()
                return

    async def _renew_once(self, margin: float) -> LeaseLost | None:
        """One renewal, retrying transient errors until margin before the end."""
        waits = self.client.policy.waits()
        last: EskvError | None = None
        while True:
            left = self._end - margin - time.monotonic()
            if left <= 0:
                return _lost(self.key, "no renewal got through before it ended", last)
            sent = time.monotonic()
            try:
                got = await self.client.once(ops.lock_op(self.key, self.verbs[1], self.holder, ttl=self.ttl),
                                             timeout=min(left, self.client.policy.attempt_timeout))
            except EskvError as e:
                if not lease_transient(e):
                    return _lost(self.key, "the server refused its renewal", e)
                last = e
                await asyncio.sleep(min(max(waits.next() or 0.0, e.retry_after), max(left, 0)))
                continue
            if int(got["token"]) != self.token:
                return _lost(self.key, f"the token is {got['token']} now, not {self.token}", None)
            self.answer, self._end = got, sent + self.ttl
            return None
