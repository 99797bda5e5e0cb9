"""The asyncio transport: HTTP/1.1 over asyncio streams, with keep-alive.

Standard library only. It sends what the sync Transport sends (the request
is built by _http.prepare), reads answers under the same bounds (at most
MAX_RESPONSE_BYTES, the call's timeout over the whole call), maps them to
the same errors (_http.decode_answer) and repeats the same calls. Only
what the Tollgate server answers is read: a status line, headers, and a
body framed by Content-Length, chunked, or the end of the connection."""

from __future__ import annotations

import asyncio
import collections
import http.client
import ssl
import time
import urllib.parse
from typing import Any, Deque, Mapping, Optional, Tuple

from . import errors as E
from ._http import MAX_RESPONSE_BYTES, Answer, Prepared, Query, _describe, decode_answer, prepare

#: Idle connections kept per client; more are closed when handed back.
MAX_IDLE = 16
#: Connections open at once per client (per event loop); a call beyond
#: them waits for one, within its timeout.
MAX_CONNECTIONS = 64
#: An idle connection older than this is closed rather than reused: well
#: within the idle timeouts of the server (120 s) and of the proxies found
#: in front of one (nginx 75 s, an AWS ALB 60 s, Node's 5 s), so that a
#: reused connection is rarely one the other side is closing.
IDLE_TIMEOUT = 4.0
#: Bounds on an answer's head.
MAX_HEADERS = 100
MAX_LINE = 8 << 10


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since = 0.0

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # pragma: no cover - closing a broken transport
            pass


class _Closed(Exception):
    """The connection ended before the answer's first byte."""


class AsyncTransport:
    """Sends requests to one server from one event loop at a time (a pool of
    keep-alive connections; a call takes one, or opens one, and hands it
    back when it read the whole answer; at most MAX_CONNECTIONS at once).
    Connects directly: HTTP proxies are not supported."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: Optional[float],
                 ssl_context: Optional[ssl.SSLContext]) -> None:
        self.base_url = base_url
        self.headers = dict(headers)
        self.timeout = timeout
        u = urllib.parse.urlsplit(base_url)
        self._tls = u.scheme == "https"
        self._host = u.hostname or ""
        self._port = u.port or (443 if self._tls else 80)
        self._host_header = u.netloc.rpartition("@")[2]
        self._ssl: Any = (ssl_context or ssl.create_default_context()) if self._tls else None
        self._idle: Deque[_Conn] = collections.deque()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._slots: Optional[asyncio.Semaphore] = None

    async def send(self, method: str, path: str, *, query: Query = None, body: Any = None,
                   timeout: Optional[float] = None, route: str = "", headers: Optional[Mapping[str, str]] = None,
                   retry: Optional[bool] = None) -> Answer:
        """As Transport.send: the Answer of a 2xx status, else the typed
        error; a repeatable call is sent again when no whole answer came."""
        req = prepare(self.base_url, self.headers, self.timeout, method, path, query, body, timeout, headers, retry)
        wire = self._head(req) + (req.data or b"")  # checked before any connection
        attempt = 1
        while True:
            try:
                status, hdrs, raw = await self._send_once(req, wire)
                break
            except E.ServerUnreachable:
                pause = req.pause(attempt)
                if pause is None:
                    raise
            await asyncio.sleep(pause)
            attempt += 1
        return decode_answer(status, hdrs, raw, req.op, route)

    async def close(self) -> None:
        """Close the idle connections (calls in flight close their own)."""
        while self._idle:
            c = self._idle.popleft()
            c.close()
            try:
                await c.writer.wait_closed()
            except Exception:
                pass

    async def _send_once(self, req: Prepared, wire: bytes) -> Tuple[int, http.client.HTTPMessage, bytes]:
        left = req.left()
        if left is not None and left <= 0:
            raise E.ServerUnreachable(f"server unreachable: {req.op}: timed out")
        try:
            return await asyncio.wait_for(self._exchange(req, wire), left)
        except E.TollgateError:
            raise
        except asyncio.TimeoutError:
            raise E.ServerUnreachable(f"server unreachable: {req.op}: timed out") from None
        except (OSError, EOFError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                http.client.HTTPException, _Closed) as err:
            msg = "connection closed" if isinstance(err, (_Closed, asyncio.IncompleteReadError)) else _describe(err)
            raise E.ServerUnreachable(f"server unreachable: {req.op}: {msg}") from err

    async def _exchange(self, req: Prepared, wire: bytes) -> Tuple[int, http.client.HTTPMessage, bytes]:
        self._bind()
        assert self._slots is not None
        async with self._slots:
            return await self._exchange_holding(req, wire)

    async def _exchange_holding(self, req: Prepared, wire: bytes) -> Tuple[int, http.client.HTTPMessage, bytes]:
        conn = self._take()
        if conn is not None:
            try:
                return await self._on(conn, req, wire)
            except (_Closed, ConnectionResetError, BrokenPipeError):
                # The other side closed the idle connection as we reused it.
                # As Go's transport: a call that may be repeated is sent
                # again at once on a new connection; any other raises
                # (ServerUnreachable), as the server may have read it.
                if not req.retry:
                    raise
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._ssl, limit=MAX_LINE)
        return await self._on(_Conn(reader, writer), req, wire)

    async def _on(self, conn: _Conn, req: Prepared, wire: bytes) -> Tuple[int, http.client.HTTPMessage, bytes]:
        done = False
        try:
            conn.writer.write(wire)
            await conn.writer.drain()
            status, hdrs, raw, keep = await _read_answer(conn.reader, req.method, req.op)
            done = True
        finally:
            if not done:
                conn.close()  # an answer half read (or cancelled) cannot be reused
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return status, hdrs, raw

    def _head(self, req: Prepared) -> bytes:
        u = urllib.parse.urlsplit(req.url)
        target = (u.path or "/") + ("?" + u.query if u.query else "")
        lines = [f"{req.method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        for k, v in req.headers.items():
            lines.append(f"{k}: {v}")
        for line in lines:
            # As http.client refuses them: a CR or LF would split the head.
            if any(c in line for c in "\r\n\0") or line.startswith((" ", "\t")):
                raise E.ValidationError("invalid header or URL: no control characters allowed", field="headers",
                                        value=repr(line.split(":", 1)[0])[:80])
        if any(c.isspace() for c in target):
            raise E.ValidationError("invalid URL: no whitespace allowed in the path", field="base_url",
                                    value=target[:80])
        if req.data is not None or req.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(req.data or b'')}")
        # Header values were made Latin-1-safe by the client, as http.client sends them.
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Connections belong to the loop that opened them (a client used
            # from successive asyncio.run calls): drop the old loop's.
            while self._idle:
                self._idle.pop().close()
            self._loop = loop
            self._slots = asyncio.Semaphore(MAX_CONNECTIONS)

    def _take(self) -> Optional[_Conn]:
        now = time.monotonic()
        while self._idle:
            c = self._idle.pop()
            if now - c.idle_since < IDLE_TIMEOUT and not c.reader.at_eof() and not c.writer.is_closing():
                return c
            c.close()
        return None

    def _give_back(self, conn: _Conn) -> None:
        if len(self._idle) >= MAX_IDLE or asyncio.get_running_loop() is not self._loop:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)


async def _read_answer(reader: asyncio.StreamReader, method: str, op: str) -> Tuple[int, http.client.HTTPMessage, bytes, bool]:
    """(status, headers, body, whether the connection may be reused)."""
    while True:
        line = await reader.readline()
        if not line:
            raise _Closed()
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
            raise http.client.BadStatusLine(line[:80].decode("latin-1"))
        version, status = parts[0], int(parts[1])
        hdrs = http.client.HTTPMessage()
        for _ in range(MAX_HEADERS + 1):
            h = await reader.readline()
            if h in (b"\r\n", b"\n"):
                break
            if not h.endswith(b"\n"):
                raise asyncio.IncompleteReadError(h, None)
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep:
                raise http.client.HTTPException("malformed header line")
            hdrs[name.strip()] = value.strip()
        else:
            raise http.client.HTTPException(f"more than {MAX_HEADERS} headers")
        if 100 <= status < 200:
            continue  # an interim answer: the real one follows
        break
    keep = version == "HTTP/1.1" and "close" not in (hdrs.get("Connection") or "").lower()
    if method == "HEAD" or status in (204, 304):
        return status, hdrs, b"", keep
    if "chunked" in (hdrs.get("Transfer-Encoding") or "").lower():
        return status, hdrs, await _read_chunked(reader, op), keep
    length = hdrs.get("Content-Length")
    if length is not None:
        n = int(length.strip())
        if n < 0:
            raise ValueError("negative Content-Length")
        if n > MAX_RESPONSE_BYTES:
            raise _too_large(op)
        return status, hdrs, await reader.readexactly(n), keep
    # No framing: the body runs to the end of the connection.
    buf = bytearray()
    while True:
        chunk = await reader.read(64 << 10)
        if not chunk:
            return status, hdrs, bytes(buf), False
        buf += chunk
        if len(buf) > MAX_RESPONSE_BYTES:
            raise _too_large(op)


async def _read_chunked(reader: asyncio.StreamReader, op: str) -> bytes:
    buf = bytearray()
    while True:
        line = await reader.readline()
        if not line.endswith(b"\n"):
            raise asyncio.IncompleteReadError(line, None)
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size < 0:
            raise ValueError("negative chunk size")
        if size == 0:
            while True:  # trailers, then the blank line
                t = await reader.readline()
                if t in (b"\r\n", b"\n"):
                    return bytes(buf)
                if not t:
                    raise asyncio.IncompleteReadError(t, None)
        if len(buf) + size > MAX_RESPONSE_BYTES:
            raise _too_large(op)
        buf += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise http.client.HTTPException("malformed chunk")


def _too_large(op: str) -> E.BadResponse:
    return E.BadResponse(f"malformed answer from the server: {op}: answer larger than {MAX_RESPONSE_BYTES} bytes")
