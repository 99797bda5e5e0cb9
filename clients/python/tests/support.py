"""Test support: runs a real `tollgate serve` for the tests.

The binary is $TOLLGATE_BIN (scripts/test-python.sh builds it), else
.cache/bin/tollgate at the repository root, else `tollgate` on PATH. When
none is found the tests skip, or fail when $CI is set.

Importing this module puts clients/python on sys.path, so the tests run
without installing the package.
"""

from __future__ import annotations

import atexit
import hashlib
import http.client
import http.server
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # clients/python
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

import tollgate  # noqa: E402  (after the sys.path change)

START_TIMEOUT = 20.0  # seconds for a server to answer /healthz
STOP_TIMEOUT = 10.0


def binary() -> str:
    path = os.environ.get("TOLLGATE_BIN")
    if path:
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"TOLLGATE_BIN={path} is not an executable")
        return path
    for cand in (os.path.join(REPO, ".cache", "bin", "tollgate"), shutil.which("tollgate")):
        if cand and os.access(cand, os.X_OK):
            return cand
    msg = ("no tollgate binary: set TOLLGATE_BIN, or run scripts/test-python.sh, "
           "which builds .cache/bin/tollgate")
    if os.environ.get("CI"):
        raise RuntimeError(msg)
    raise unittest.SkipTest(msg)


def free_port() -> int:
    """A port nothing listens on now (it may be taken before we use it: the
    caller retries on a clash)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # Linux: the server gets SIGTERM if the test process dies without
    # stopping it. Elsewhere, atexit and tearDown stop it.
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Server:
    """One `tollgate serve --store memory:` on a free loopback port."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""
        self.log_path = ""

    def start(self) -> "Server":
        exe = binary()
        last = ""
        for _ in range(5):
            port = free_port()
            fd, self.log_path = tempfile.mkstemp(prefix="tollgate-serve-", suffix=".log")
            with os.fdopen(fd, "wb") as log:
                self.proc = subprocess.Popen(
                    [exe, "serve", "--store", "memory:", "--addr", f"127.0.0.1:{port}", *self.args],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                )
            self.url = f"http://127.0.0.1:{port}"
            if self._wait_healthy():
                return self
            last = self.log()
            self.stop()
            if "address already in use" not in last:
                break
        raise RuntimeError(f"tollgate serve did not come up; its output:\n{last}")

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        return False

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        if self.log_path:
            try:
                os.unlink(self.log_path)
            except OSError:
                pass
            self.log_path = ""


_shared: Optional[Server] = None
_lock = threading.Lock()


def server() -> Server:
    """The server the test modules share (started once, stopped at exit).
    Tests keep apart by using fresh entity and resource names (uid)."""
    global _shared
    with _lock:
        if _shared is None:
            s = Server().start()
            atexit.register(s.stop)
            _shared = s
        return _shared


class LossyProxy:
    """A proxy in front of a server that can lose answers: with ``lose`` set
    to n, it forwards each of the next n requests, reads the server's whole
    answer, and closes the connection without a byte of it, as a
    connection reset after the server acted would. It records what it
    forwarded: ``sent`` (how many requests), ``keys`` (each one's
    Idempotency-Key header, or None) and ``paths``. With ``hold_next``, it
    holds the next request's answer instead (after the server acted,
    ``acted`` is set) until ``close``, then loses it: a caller's
    cancellation with the request in flight."""

    _HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "date", "server"}

    def __init__(self, upstream: str) -> None:
        u = urllib.parse.urlsplit(upstream)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.lose = 0
        self.hold = 0
        self.acted = threading.Event()
        self._release = threading.Event()
        self.sent = 0
        self.keys: List[Optional[str]] = []
        self.paths: List[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in LossyProxy._HOP}
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=10)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                with proxy._lock:
                    proxy.sent += 1
                    proxy.keys.append(self.headers.get("Idempotency-Key"))
                    proxy.paths.append(self.path)
                    lost = proxy.lose > 0
                    if lost:
                        proxy.lose -= 1
                    held = proxy.hold > 0
                    if held:
                        proxy.hold -= 1
                if held:
                    proxy.acted.set()
                    proxy._release.wait(30)
                    lost = True
                if lost:
                    self.close_connection = True
                    return  # the server acted; its answer is lost
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in LossyProxy._HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *args) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def lose_next(self, n: int = 1) -> int:
        """Lose the answers of the next n requests; returns how many were
        sent so far, to count this call's sends from."""
        with self._lock:
            self.lose = n
            return self.sent

    def hold_next(self) -> None:
        """Hold the answer of the next request (see the class)."""
        with self._lock:
            self.hold = 1
            self.acted.clear()

    def close(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def client(**kw) -> tollgate.Client:
    return tollgate.Client(server().url, **kw)


def uid(prefix: str) -> str:
    """A fresh identifier, so that tests sharing a server do not meet."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def keys_file(keys: List[List[str]]) -> str:
    """A --keys file for rows of [key, namespace, role, name, *options], the
    options being "entity=ID" (the key acts on that entity and its
    descendants only) and "allow_limits" (it may send its own limits)."""
    fd, path = tempfile.mkstemp(prefix="tollgate-keys-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        for key, ns, role, name, *options in keys:
            line = " ".join([f"sha256:{hashlib.sha256(key.encode()).hexdigest()}", ns, role, name, *options])
            f.write(line + "\n")
    return path


def new_key() -> str:
    return "tg_" + secrets.token_urlsafe(32)


class ServerTest(unittest.TestCase):
    """A test case with a client of the shared server."""

    client: tollgate.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.client = client()

    def limits_resource(self, limits: List[str]) -> str:
        """A fresh resource with limits stored at the resource level."""
        resource = uid("res")
        self.client.set_limits(limits, resource=resource)
        return resource

    def available(self, entity: str, resource: str, **kw) -> Dict[str, int]:
        return {s.limit: s.available for s in self.client.available(entity, resource, **kw) if s.entity == entity}
