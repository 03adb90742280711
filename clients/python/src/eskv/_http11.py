"""Sans-IO pieces of the minimal HTTP/1.1 the async client speaks: the
request head, the status line and header lines, and how an answer's body
is framed (Content-Length, chunked, or until the connection closes)."""

from __future__ import annotations

from typing import Mapping

from .errors import TransportError

#: Longest status or header line accepted.
MAX_LINE = 64 << 10


class ProtocolError(TransportError):
    """An answer that is not well-formed HTTP/1.1."""


def request_head(method: str, target: str, host: str, headers: Mapping[str, str], body_len: int | None) -> bytes:
    """The bytes of a request's head (keep-alive; Content-Length when a body goes)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Connection: keep-alive"]
    for k, v in headers.items():
        if "\r" in k + v or "\n" in k + v:
            raise ProtocolError(f"header {k!r} holds a line break")
        lines.append(f"{k}: {v}")
    if body_len is not None:
        lines.append(f"Content-Length: {body_len}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_status(line: bytes) -> int:
    """The status code of a status line (``HTTP/1.1 200 OK``)."""
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {line[:100]!r}")
    return int(parts[1])


def parse_header(line: bytes) -> tuple[str, str]:
    """One header line as (lowercased name, value)."""
    name, sep, value = line.decode("latin-1").rstrip("\r\n").partition(":")
    if not sep or not name or name != name.strip():
        raise ProtocolError(f"bad header line {line[:100]!r}")
    return name.lower(), value.strip()


def body_framing(method: str, status: int, headers: Mapping[str, str]) -> tuple[str, int]:
    """How the answer's body is framed: ("none", 0), ("length", n),
    ("chunked", 0) or ("close", 0) (read until the connection closes)."""
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return "none", 0
    te = headers.get("transfer-encoding", "").lower()
    if te:
        if te.split(",")[-1].strip() != "chunked":
            raise ProtocolError(f"unsupported transfer-encoding {te!r}")
        return "chunked", 0
    cl = headers.get("content-length")
    if cl is not None:
        if not cl.strip().isdigit():
            raise ProtocolError(f"bad content-length {cl!r}")
        return "length", int(cl)
    return "close", 0


def chunk_size(line: bytes) -> int:
    """The size of a chunk from its size line (extensions ignored)."""
    s = line.split(b";", 1)[0].strip()
    try:
        return int(s, 16)
    except ValueError:
        raise ProtocolError(f"bad chunk size line {line[:100]!r}") from None


def keeps_alive(headers: Mapping[str, str], framing: str) -> bool:
    """Whether the connection may carry another request after this answer."""
    return framing != "close" and "close" not in headers.get("connection", "").lower()
