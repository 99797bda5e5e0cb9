"""The HTTP transport: one JSON request, one bounded answer, typed errors.

Only the standard library: urllib.request for the call, json for bodies."""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import errors as E
from .types import statuses

#: Bounds the body of any answer the client reads (as the Go client's).
MAX_RESPONSE_BYTES = 1 << 20
#: Bounds on what a server's error body may put into an error.
MAX_MESSAGE_LEN = 512
MAX_FIELD_LEN = 128
#: The longest retry-after the API sends, in milliseconds (2^63-1: a refill
#: longer than that saturates there); larger or negative values are clamped.
#: A wait is exact however long: deep debt at a slow rate can take millennia.
MAX_RETRY_AFTER_MS = (1 << 63) - 1

#: How many times, at most, a call that may be repeated is sent when no
#: answer comes back (as the Go client's).
MAX_ATTEMPTS = 3
#: The pauses before the second and the third send, in seconds.
RETRY_BACKOFF = (0.05, 0.2)

_CHUNK = 64 << 10

Query = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], None]


def seg(s: str) -> str:
    """Escape one path segment: every '/' becomes %2F (resources such as
    openai/gpt-4o and reservation ids may contain '/')."""
    return urllib.parse.quote(s, safe="")


def _truncate(s: Any, n: int) -> str:
    if not isinstance(s, str):
        return ""
    return s[:n]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Answer(NamedTuple):
    """A 2xx answer: its status, decoded JSON body (None if empty) and headers."""

    status: int
    data: Any
    headers: Any  # an email.message.Message: case-insensitive get()


class Transport:
    """Sends requests to one server. Safe for concurrent use (urllib opens
    one connection per call; there is no shared mutable state)."""

    def __init__(
        self,
        base_url: str,
        headers: Dict[str, str],
        timeout: Optional[float],
        ssl_context: Optional[ssl.SSLContext],
        proxies: Optional[Dict[str, str]],
    ) -> None:
        self.base_url = base_url
        self.headers = headers
        self.timeout = timeout
        host = urllib.parse.urlsplit(base_url).hostname or ""
        if proxies is None and _is_loopback(host):
            # As Go's ProxyFromEnvironment: never send loopback calls to
            # the environment's proxy.
            proxies = {}
        handlers: List[Any] = [urllib.request.ProxyHandler(proxies)]  # None: from the environment
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self.opener = urllib.request.build_opener(*handlers)

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        body: Any = None,
        timeout: Optional[float] = None,
        route: str = "",
        retry: Optional[bool] = None,
    ) -> Tuple[int, Any]:
        """Send a request; return (status, decoded JSON or None) for a 2xx
        answer, raise the typed error otherwise. See send()."""
        a = self.send(method, path, query=query, body=body, timeout=timeout, route=route, retry=retry)
        return a.status, a.data

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        body: Any = None,
        timeout: Optional[float] = None,
        route: str = "",
        headers: Optional[Mapping[str, str]] = None,
        retry: Optional[bool] = None,
    ) -> Answer:
        """Send a request; return the Answer of a 2xx status, raise the typed
        error otherwise. path is below the base URL, segments already
        escaped. route names the kind of call where the error classes depend
        on it ("lease", "reservation"); headers are added to the client's.

        A call that may be repeated (retry; None: a GET) is sent again when
        no answer came back whole (ServerUnreachable: the connection failed,
        was reset, or the answer broke off), up to MAX_ATTEMPTS sends in
        all, pausing RETRY_BACKOFF between them, all within the call's
        timeout: the server may have acted on it, and the caller makes the
        repeat harmless (an idempotency key, an ending the server
        remembers)."""
        req = prepare(self.base_url, self.headers, self.timeout, method, path, query, body, timeout, headers, retry)
        attempt = 1
        while True:
            left = req.left()
            try:
                if left is not None and left <= 0:
                    raise E.ServerUnreachable(f"server unreachable: {req.op}: timed out")
                r = urllib.request.Request(req.url, data=req.data, headers=req.headers, method=method)
                return self._send_once(r, left, req.deadline, req.op, route)
            except E.ServerUnreachable:
                pause = req.pause(attempt)
                if pause is None:
                    raise
            time.sleep(pause)
            attempt += 1

    def _send_once(self, req: urllib.request.Request, limit: Optional[float], deadline: Optional[float],
                   op: str, route: str) -> Answer:
        try:
            try:
                resp = self.opener.open(req, timeout=limit)
            except urllib.error.HTTPError as he:
                resp = he  # a non-2xx answer: its body is the error
            try:
                status = resp.status if hasattr(resp, "status") else resp.code
                raw = _read_bounded(resp, deadline, op)
                resp_headers = resp.headers
            finally:
                resp.close()
        except E.TollgateError:
            raise
        except urllib.error.URLError as ue:
            raise E.ServerUnreachable(f"server unreachable: {op}: {_describe(ue.reason)}") from ue
        except (OSError, http.client.HTTPException) as oe:
            raise E.ServerUnreachable(f"server unreachable: {op}: {_describe(oe)}") from oe
        return decode_answer(status, resp_headers, raw, op, route)


class Prepared(NamedTuple):
    """One call, ready to send by either transport (sync or asyncio)."""

    method: str
    url: str
    data: Optional[bytes]
    headers: Dict[str, str]
    op: str  # "METHOD URL", for error messages
    retry: bool  # whether a send that got no whole answer may be repeated
    deadline: Optional[float]  # time.monotonic() bound of the whole call

    def left(self) -> Optional[float]:
        """Seconds left before the call's deadline (None: unbounded)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def pause(self, attempt: int) -> Optional[float]:
        """How long to pause before sending again after send number attempt
        got no answer, or None when the call must not be sent again (not
        repeatable, out of attempts, or the pause would pass the deadline)."""
        if not self.retry or attempt >= MAX_ATTEMPTS:
            return None
        pause = RETRY_BACKOFF[attempt - 1]
        if self.deadline is not None and time.monotonic() + pause >= self.deadline:
            return None
        return pause


def prepare(base_url: str, client_headers: Mapping[str, str], client_timeout: Optional[float], method: str, path: str,
            query: Query = None, body: Any = None, timeout: Optional[float] = None,
            headers: Optional[Mapping[str, str]] = None, retry: Optional[bool] = None) -> Prepared:
    """Build a call as Transport.send describes it; shared by both
    transports so that they send the same bytes and repeat the same calls."""
    url = base_url + path
    if query:
        url += "?" + urllib.parse.urlencode(query, doseq=True)
    data = None
    hdrs = dict(client_headers)
    if headers:
        hdrs.update(headers)
    if body is not None:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        hdrs["Content-Type"] = "application/json"
    if retry is None:
        retry = method == "GET"
    limit = client_timeout if timeout is None else timeout
    deadline = None if limit is None else time.monotonic() + limit
    return Prepared(method, url, data, hdrs, f"{method} {url}", retry, deadline)


def decode_answer(status: int, headers: Any, raw: bytes, op: str, route: str) -> Answer:
    """The Answer of a 2xx status; raise the typed error of any other."""
    if 200 <= status <= 299:
        if status == 204 or not raw.strip():
            return Answer(status, None, headers)
        try:
            return Answer(status, json.loads(raw), headers)
        except ValueError as ve:
            raise E.BadResponse(f"malformed answer from the server: {op}: {ve}", status=status) from None
    raise decode_error(status, headers, raw, route)


def _describe(err: Any) -> str:
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, socket.gaierror):
        return f"cannot resolve host ({err})"
    return str(err) or type(err).__name__


def _read_bounded(resp: Any, deadline: Optional[float], op: str) -> bytes:
    """Read at most MAX_RESPONSE_BYTES, in chunks, stopping at the call's
    deadline (each read is also bounded by the socket timeout)."""
    buf = bytearray()
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise E.ServerUnreachable(f"server unreachable: {op}: timed out reading the answer")
        chunk = resp.read(min(_CHUNK, MAX_RESPONSE_BYTES + 1 - len(buf)))
        if not chunk:
            return bytes(buf)
        buf += chunk
        if len(buf) > MAX_RESPONSE_BYTES:
            raise E.BadResponse(f"malformed answer from the server: {op}: answer larger than {MAX_RESPONSE_BYTES} bytes")


_NOT_FOUND = {
    "entity_not_found": E.EntityNotFound,
    "namespace_not_found": E.NamespaceNotFound,
    "key_not_found": E.KeyNotFound,
    "lease_not_found": E.LeaseNotFound,
}
_CONFLICT = {
    "entity_exists": E.EntityExists,
    "namespace_exists": E.NamespaceExists,
    "key_exists": E.KeyExists,
    "namespace_deleted": E.NamespaceDeleted,
    "reservation_conflict": E.ReservationConflict,
    "idempotency_key_reused": E.IdempotencyConflict,
    "lease_closed": E.LeaseClosed,
}


def _retry_after_header(v: Optional[str]) -> int:
    """Retry-After (whole seconds) in milliseconds, saturated; 0 if absent
    or not a number."""
    try:
        n = int((v or "").strip())
    except ValueError:
        return 0
    return _clamp_ms(n * 1000)


def _clamp_ms(ms: int) -> int:
    return min(max(ms, 0), MAX_RETRY_AFTER_MS)


def decode_error(status: int, headers: Any, raw: bytes, route: str = "") -> E.TollgateError:
    """The typed error for a non-2xx answer: from the API's error body, or,
    for a body that is not one (a proxy's page), from the status alone."""
    body: Dict[str, Any] = {}
    try:
        v = json.loads(raw)
        if isinstance(v, dict) and isinstance(v.get("error"), str) and v["error"]:
            body = v
    except ValueError:
        pass
    retry_header = headers.get("Retry-After") if headers is not None else None
    if not body:
        text = raw.decode("utf-8", "replace").strip()
        msg = f"{status} {http.client.responses.get(status, '')}".strip()
        if text:
            msg += ": " + text
        msg = _truncate(msg, MAX_MESSAGE_LEN)
        if status == 401:
            return E.Unauthorized(msg, status=status)
        if status == 403:
            return E.Forbidden(msg, status=status)
        if status == 429:
            ms = _retry_after_header(retry_header)
            return E.RateLimitExceeded(msg, status=status, code="rate_limited",
                                       retry_after=ms / 1000.0, statuses=[], retry_after_ms=ms)
        if status in (502, 503, 504):
            return E.Unavailable(msg, status=status)
        if status == 412:
            return E.PreconditionFailed(msg, status=status)
        return E.ServerError(msg, status=status)

    code = body["error"]
    message = _truncate(body.get("message"), MAX_MESSAGE_LEN) or code
    reason = _truncate(body.get("reason"), MAX_FIELD_LEN)
    kw = dict(status=status, code=code, reason=reason, body=body)
    if code == "rate_limited":
        ms = body.get("retry_after_ms")
        if isinstance(ms, bool) or not isinstance(ms, int):
            # Absent: none (a release awaited), unless a header says one.
            ms = _retry_after_header(retry_header)
        ms = _clamp_ms(ms)
        try:
            sts = statuses(body)
        except E.BadResponse:
            sts = []
        waits = body.get("waits")
        return E.RateLimitExceeded(message, retry_after=ms / 1000.0, statuses=sts, retry_after_ms=ms,
                                   waits=_truncate(waits, MAX_FIELD_LEN), **kw)
    if code == "invalid_argument":
        return E.ValidationError(message, field=_truncate(body.get("field"), MAX_FIELD_LEN),
                                 value=_truncate(body.get("value"), MAX_FIELD_LEN), **kw)
    if code == "unauthenticated":
        return E.Unauthorized(message, **kw)
    if code == "permission_denied":
        return E.Forbidden(message, field=_truncate(body.get("field"), MAX_FIELD_LEN), **kw)
    if code == "not_found":
        cls = _NOT_FOUND.get(reason, E.NotFound)
        if cls is E.LeaseNotFound and route == "reservation":
            cls = E.ReservationNotFound
        return cls(message, **kw)
    if code == "conflict":
        ended = _truncate(body.get("ended"), MAX_FIELD_LEN)
        if reason == "lease_closed" and ended:
            return E.LeaseEnded(message, ended=ended, **kw)
        return _CONFLICT.get(reason, E.Conflict)(message, **kw)
    if code == "precondition_failed":
        return E.PreconditionFailed(message, **kw)
    if code == "unavailable":
        return E.Unavailable(message, **kw)
    if code == "unimplemented":
        return E.Unimplemented(message, **kw)
    return E.ServerError(message, **kw)
