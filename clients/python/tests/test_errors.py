"""Typed errors: from a real server (429, 400, 404), from no server at all
(ServerUnreachable), and from answers no Tollgate server sends (a stub
HTTP server: proxies' pages, oversized bodies, silence)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
import unittest
from datetime import timedelta

import support
from support import ServerTest, uid

import tollgate


class ServerErrorsTest(ServerTest):
    def test_rate_limited_has_retry_after_and_statuses(self):
        resource = self.limits_resource(["rpm:2", "tpm:1000/day"])
        entity = uid("key")
        self.client.acquire_and_commit(entity, resource, {"rpm": 2})
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire(entity, resource, {"rpm": 1, "tpm": 10})
        e = cm.exception
        self.assertEqual((e.status, e.code), (429, "rate_limited"))
        # 2 per minute: one token comes back in about 30 s.
        self.assertGreater(e.retry_after, 20)
        self.assertLessEqual(e.retry_after, 30)
        self.assertIsInstance(e.retry_after_timedelta, timedelta)
        self.assertAlmostEqual(e.retry_after_timedelta.total_seconds(), e.retry_after, places=3)
        self.assertEqual(len(e.statuses), 2)
        self.assertTrue(all(isinstance(s, tollgate.LimitStatus) for s in e.statuses))
        rpm = [s for s in e.statuses if s.limit == "rpm"][0]
        self.assertEqual((rpm.entity, rpm.resource, rpm.capacity, rpm.available, rpm.requested), (entity, resource, 2, 0, 1))
        self.assertTrue(rpm.exceeded)
        self.assertEqual(rpm.retry_after, rpm.retry_after_ms / 1000)
        self.assertEqual(e.exceeded, [rpm])
        self.assertIn("rate limited", str(e))
        # Nothing was consumed by the denial.
        self.assertEqual(self.available(entity, resource)["tpm"], 1000)

    def test_deep_debt_says_millennia(self):
        # Issue 21: 10^12 tokens of debt at 1 a second is about 31,700
        # years; the server once said 1 s (Retry-After) and 0 (available).
        resource = self.limits_resource(["rps:1/sec"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rps": 1})
        lease.adjust({"rps": 10**12})
        lease.commit()
        want_ms = (10**12 + 1) * 1000
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire(entity, resource, {"rps": 1})
        e = cm.exception
        # Less the few milliseconds of refill since the debt, on the
        # server's clock.
        self.assertTrue(want_ms - 10_000 < e.retry_after_ms <= want_ms, e.retry_after_ms)
        self.assertEqual(e.retry_after, e.retry_after_ms / 1000)
        self.assertEqual(e.retry_after_timedelta, timedelta(milliseconds=e.retry_after_ms))
        self.assertEqual(e.exceeded[0].retry_after_ms, e.retry_after_ms)
        self.assertEqual(e.waits, "")
        self.assertAlmostEqual(self.client.time_until_available(entity, resource, {"rps": 1}), want_ms / 1000, delta=10)

    def test_full_reserved_limit_waits_for_a_release(self):
        resource = uid("emr")
        entity = uid("team")
        limits = ["clusters:1/reserved"]
        self.client.reserve(entity, resource, uid("j"), limits=limits)
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.reserve(entity, resource, uid("j"), limits=limits)
        e = cm.exception
        self.assertEqual((e.retry_after, e.retry_after_ms, e.waits), (0, 0, "release"))
        self.assertEqual((e.exceeded[0].kind, e.exceeded[0].waits), ("reserved", "release"))
        self.assertIn("waits for a release", str(e))

    def test_amount_above_capacity_is_a_validation_error_naming_the_field(self):
        resource = self.limits_resource(["rpm:100"])
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.acquire(uid("key"), resource, {"rpm": 1000})
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field, e.value), (400, "invalid_argument", "consume.rpm", "1000"))
        self.assertIn("capacity", e.reason)
        self.assertIsInstance(e, ValueError)

    def test_unknown_limit_name_and_missing_limits(self):
        resource = self.limits_resource(["rpm:100"])
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.acquire(uid("key"), resource, {"tokens": 1})
        self.assertEqual(cm.exception.field, "consume.tokens")
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.acquire(uid("key"), uid("unconfigured"), {"rpm": 1})
        self.assertEqual(cm.exception.field, "limits")
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.acquire(uid("key"), resource, {"rpm": 1}, limits=["rpm:ten"])
        self.assertEqual(cm.exception.field, "limit")  # the bad limit text
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.acquire(uid("key"), resource, {"rpm": 1}, lease_ttl=0.2)
        self.assertEqual(cm.exception.field, "lease_ttl_ms")

    def test_not_found_reasons(self):
        with self.assertRaises(tollgate.EntityNotFound) as cm:
            self.client.get_entity(uid("ghost"))
        self.assertEqual((cm.exception.status, cm.exception.reason), (404, "entity_not_found"))
        with self.assertRaises(tollgate.LeaseNotFound):
            self.client.resume_lease("0" * 32)
        with self.assertRaises(tollgate.NotFound) as cm:
            self.client.get_limits(resource=uid("nothing-stored"))
        self.assertEqual(cm.exception.reason, "not_found")


class ClientSideValidationTest(unittest.TestCase):
    """Bad arguments fail before any call (the port is closed: a call would
    be ServerUnreachable)."""

    def setUp(self):
        self.client = tollgate.Client(f"http://127.0.0.1:{support.free_port()}")

    def test_bad_arguments(self):
        cases = [
            (lambda: self.client.acquire("k", "r", {"rpm": 1.5}), "consume.rpm"),
            (lambda: self.client.acquire("k", "r", {"rpm": True}), "consume.rpm"),
            (lambda: self.client.acquire("k", "r", {"rpm": -1}), "consume.rpm"),
            (lambda: self.client.acquire("k", "r", ["rpm"]), "consume"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, limits="rpm:10"), "limits"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, limits=[]), "limits"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, on_unavailable="maybe"), "on_unavailable"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, idempotency_key=""), "idempotency_key"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, idempotency_key="x" * 256), "idempotency_key"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, idempotency_key="caf\u00e9"), "idempotency_key"),
            (lambda: self.client.acquire("k", "r", {"rpm": 1}, idempotency_key="a\tb"), "idempotency_key"),
            (lambda: self.client.acquire_and_commit("k", "r", {"rpm": 1}, idempotency_key=" order-1"), "idempotency_key"),
            (lambda: self.client.acquire_and_commit("k", "r", {"rpm": 1}, idempotency_key=42), "idempotency_key"),
            (lambda: self.client.penalize("k", "r", ["rpm"]), "retry_after_ms"),
            (lambda: self.client.penalize("k", "r", [], retry_after=1), "limits"),
            (lambda: self.client.reset("k", "r", limits=[]), "limits"),
            (lambda: self.client.reset("k", "r", limits="rpm"), "limits"),
            (lambda: self.client.create_key("", "acquire"), "name"),
            (lambda: self.client.create_key("ci", "root"), "role"),
            (lambda: self.client.create_key("ci", "acquire", entity=""), "entity"),
            (lambda: self.client.create_key("ci", "acquire", allow_limits="yes"), "allow_limits"),
            (lambda: self.client.create_key("ci", "acquire", expires_in=0), "expires_in_s"),
            (lambda: self.client.create_key("ci", "acquire", expires_in=timedelta(seconds=-5)), "expires_in_s"),
            (lambda: self.client.revoke_key(""), "name"),
            (lambda: tollgate.Client("ftp://x"), "base_url"),
            (lambda: tollgate.Client("http://h/?q=1"), "base_url"),
            (lambda: tollgate.Client("http://h", namespace="bad name"), "namespace"),
            (lambda: tollgate.Client("http://h", timeout=0), "timeout"),
        ]
        for call, field in cases:
            with self.subTest(field=field):
                with self.assertRaises(tollgate.ValidationError) as cm:
                    call()
                self.assertEqual(cm.exception.field, field)


class UnreachableTest(unittest.TestCase):
    def test_closed_port_is_server_unreachable_a_kind_of_unavailable(self):
        client = tollgate.Client(f"http://127.0.0.1:{support.free_port()}")
        with self.assertRaises(tollgate.ServerUnreachable) as cm:
            client.acquire("k", "r", {"rpm": 1})
        e = cm.exception
        self.assertIsInstance(e, tollgate.Unavailable)  # fail open or closed alike, as in Go
        self.assertIsNone(e.status)
        self.assertIn("server unreachable", str(e))
        self.assertIn("connection refused", str(e))
        self.assertIsNotNone(e.__cause__)

    def test_unknown_host_is_server_unreachable(self):
        client = tollgate.Client("http://tollgate.invalid:8080", timeout=5)
        with self.assertRaises(tollgate.ServerUnreachable):
            client.health()

    def test_silent_server_times_out(self):
        # A socket that listens but never answers: the kernel accepts the
        # connection, the request is sent, no answer ever comes.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            client = tollgate.Client(f"http://127.0.0.1:{s.getsockname()[1]}", timeout=0.5)
            start = time.monotonic()
            with self.assertRaises(tollgate.ServerUnreachable) as cm:
                client.acquire("k", "r", {"rpm": 1})
            self.assertLess(time.monotonic() - start, 5)
            self.assertIn("timed out", str(cm.exception))


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers what the test put in the class attribute `answer`."""

    answer = (200, {}, b"")

    def _reply(self):
        status, headers, body = type(self).answer
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _reply

    def log_message(self, *args):
        pass


class StubAnswersTest(unittest.TestCase):
    """Answers a Tollgate server does not send, but a proxy or a broken
    server might: the client's errors stay typed and bounded."""

    @classmethod
    def setUpClass(cls):
        cls.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        cls.thread = threading.Thread(target=cls.httpd.serve_forever, daemon=True)
        cls.thread.start()
        cls.client = tollgate.Client(f"http://127.0.0.1:{cls.httpd.server_address[1]}", timeout=5)

    @classmethod
    def tearDownClass(cls):
        cls.httpd.shutdown()
        cls.httpd.server_close()
        cls.thread.join(5)

    def answer(self, status, body=b"", **headers):
        _Stub.answer = (status, headers, body)

    def test_proxy_page_502_is_unavailable(self):
        self.answer(502, b"<html>Bad Gateway</html>", **{"Content-Type": "text/html"})
        with self.assertRaises(tollgate.Unavailable) as cm:
            self.client.health()
        self.assertEqual(cm.exception.status, 502)

    def test_store_unavailable_503_body(self):
        self.answer(503, b'{"error":"unavailable","message":"the store did not answer"}')
        with self.assertRaises(tollgate.Unavailable) as cm:
            self.client.acquire("k", "r", {"rpm": 1})
        self.assertNotIsInstance(cm.exception, tollgate.ServerUnreachable)
        self.assertEqual(str(cm.exception), "the store did not answer")

    def test_plain_429_takes_retry_after_header(self):
        self.answer(429, b"slow down", **{"Retry-After": "3"})
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire("k", "r", {"rpm": 1})
        self.assertEqual(cm.exception.retry_after, 3.0)
        self.assertEqual(cm.exception.statuses, [])

    def test_huge_retry_after_saturates(self):
        # A refill beyond 2^63-1 ms saturates there; a timedelta saturates
        # at its own maximum rather than raise OverflowError.
        most = (1 << 63) - 1
        body = ('{"error":"rate_limited","message":"m","retry_after_ms":%d,"limits":[{"entity":"k","resource":"r",'
                '"limit":"x","kind":"rate","capacity":1,"available":-1,"requested":1,"exceeded":true,"retry_after_ms":%d}]}'
                % (most, most))
        self.answer(429, body.encode(), **{"Retry-After": str(most // 1000 + 1)})
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire("k", "r", {"x": 1})
        e = cm.exception
        self.assertEqual(e.retry_after_ms, most)
        self.assertEqual(e.retry_after_timedelta, timedelta.max)
        self.assertEqual(e.statuses[0].retry_after_timedelta, timedelta.max)
        self.assertEqual(e.backoff(), (most / 1000, most / 1000))
        self.answer(429, b"slow down", **{"Retry-After": "9" * 30})
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire("k", "r", {"x": 1})
        self.assertEqual(cm.exception.retry_after_ms, most)

    def test_plain_401_and_403(self):
        self.answer(401, b"no")
        with self.assertRaises(tollgate.Unauthorized):
            self.client.health()
        self.answer(403, b"no")
        with self.assertRaises(tollgate.Forbidden):
            self.client.health()

    def test_permission_denied_names_the_field(self):
        self.answer(403, b'{"error":"permission_denied","message":"permission denied: limits: no",'
                         b'"field":"limits","reason":"no"}')
        with self.assertRaises(tollgate.Forbidden) as cm:
            self.client.acquire("k", "r", {"rpm": 1}, limits=["rpm:1"])
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field, e.reason), (403, "permission_denied", "limits", "no"))
        self.answer(403, b'{"error":"permission_denied","message":"permission denied: role read may not do this"}')
        with self.assertRaises(tollgate.Forbidden) as cm:
            self.client.acquire("k", "r", {"rpm": 1})
        self.assertEqual((cm.exception.field, cm.exception.reason), ("", ""))

    def test_key_reasons(self):
        self.answer(404, b'{"error":"not_found","message":"revoke key ci: API key not found","reason":"key_not_found"}')
        with self.assertRaises(tollgate.KeyNotFound):
            self.client.revoke_key("ci")
        self.answer(409, b'{"error":"conflict","message":"create key ci: API key already exists","reason":"key_exists"}')
        with self.assertRaises(tollgate.KeyExists):
            self.client.create_key("ci", "acquire")

    def test_created_key_without_a_secret_is_bad_response(self):
        self.answer(201, b'{"name":"ci","namespace":"default","role":"acquire","allow_limits":false,"created_at_ms":1}')
        with self.assertRaises(tollgate.BadResponse):
            self.client.create_key("ci", "acquire")

    def test_oversized_answer_is_bad_response(self):
        self.answer(200, b'{"status":"' + b"x" * (tollgate.MAX_RESPONSE_BYTES + 10) + b'"}')
        with self.assertRaises(tollgate.BadResponse) as cm:
            self.client.health()
        self.assertIn("larger than", str(cm.exception))

    def test_not_json_or_wrong_shape_is_bad_response(self):
        self.answer(200, b"<html>hello</html>")
        with self.assertRaises(tollgate.BadResponse):
            self.client.health()
        self.answer(200, b'{"lease_id":"abc","consumed":{"rpm":"one"},"limits":[]}')
        with self.assertRaises(tollgate.BadResponse):
            self.client.acquire("k", "r", {"rpm": 1})
        self.answer(200, b'{"consumed":{},"limits":[]}')
        with self.assertRaises(tollgate.BadResponse):
            self.client.acquire("k", "r", {"rpm": 1})  # granted without a lease id

    def test_error_texts_are_bounded(self):
        self.answer(409, b'{"error":"conflict","reason":"' + b"r" * 1000 + b'","message":"' + b"m" * 5000 + b'"}')
        with self.assertRaises(tollgate.Conflict) as cm:
            self.client.health()
        self.assertLessEqual(len(cm.exception.message), 512)
        self.assertLessEqual(len(cm.exception.reason), 128)

    def test_unknown_status_is_server_error(self):
        self.answer(500, b'{"error":"internal","message":"internal error"}')
        with self.assertRaises(tollgate.ServerError) as cm:
            self.client.health()
        self.assertEqual(cm.exception.status, 500)


if __name__ == "__main__":
    unittest.main()
