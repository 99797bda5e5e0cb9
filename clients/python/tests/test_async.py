"""AsyncClient against a real tollgate serve: the sync tests' key cases,
through the asyncio transport."""

from __future__ import annotations

import asyncio
import gc
import http.server
import socket
import threading
import time
import unittest
import warnings

import support
from support import uid

import tollgate


class AsyncServerTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        asyncio.get_running_loop().slow_callback_duration = 2  # debug mode: a loaded machine is slow
        self.sync = support.client()
        self.client = tollgate.AsyncClient(support.server().url)

    async def asyncTearDown(self):
        await self.client.close()

    def limits_resource(self, limits):
        resource = uid("res")
        self.sync.set_limits(limits, resource=resource)
        return resource

    async def available(self, entity, resource):
        return {s.limit: s.available for s in await self.client.available(entity, resource) if s.entity == entity}


class AsyncLeaseTest(AsyncServerTest):
    async def test_acquire_adjust_commit(self):
        resource = self.limits_resource(["rpm:10", "tpm:10000/day:15000"])
        entity = uid("key")
        lease = await self.client.acquire(entity, resource, {"rpm": 1, "tpm": 500})
        self.assertIsInstance(lease, tollgate.AsyncLease)
        self.assertEqual((lease.entity, lease.resource, lease.state), (entity, resource, "open"))
        self.assertEqual({s.limit: s.available for s in lease.statuses}, {"rpm": 9, "tpm": 14500})
        await lease.adjust({"tpm": 700})
        self.assertEqual(lease.consumed, {"rpm": 1, "tpm": 1200})
        before = lease.expires_at
        await lease.extend(600)
        self.assertGreater(lease.expires_at, before)
        await lease.commit()
        self.assertEqual(lease.state, "committed")
        self.assertEqual(await self.available(entity, resource), {"rpm": 9, "tpm": 13800})
        with self.assertRaises(tollgate.LeaseClosed):
            await lease.rollback()

    async def test_async_with_commits_or_rolls_back(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        async with await self.client.acquire(entity, resource, {"rpm": 2}) as lease:
            pass
        self.assertEqual(lease.state, "committed")
        with self.assertRaises(KeyError):
            async with await self.client.acquire(entity, resource, {"rpm": 3}) as lease:
                raise KeyError("boom")
        self.assertEqual(lease.state, "rolled_back")
        self.assertEqual(await self.available(entity, resource), {"rpm": 8})

    async def test_cancelled_task_rolls_back_its_lease(self):
        resource = self.limits_resource(["jobs:1/concurrent"])
        entity = uid("key")
        holding = asyncio.Event()
        leases = []

        async def work():
            async with await self.client.acquire(entity, resource, {"jobs": 1}) as lease:
                leases.append(lease)
                holding.set()
                await asyncio.sleep(60)

        task = asyncio.ensure_future(work())
        await holding.wait()
        self.assertEqual(await self.available(entity, resource), {"jobs": 0})
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual(leases[0].state, "rolled_back")
        self.assertEqual(await self.available(entity, resource), {"jobs": 1})  # the slot came back at once

    async def test_denial_has_retry_after_and_statuses(self):
        resource = self.limits_resource(["rpm:1"])
        entity = uid("key")
        grant = await self.client.acquire_and_commit(entity, resource, {"rpm": 1})
        self.assertEqual((grant.consumed, grant.replayed), ({"rpm": 1}, False))
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            await self.client.acquire(entity, resource, {"rpm": 1})
        e = cm.exception
        self.assertGreater(e.retry_after, 0)
        self.assertEqual([s.limit for s in e.exceeded], ["rpm"])
        self.assertGreater(await self.client.time_until_available(entity, resource, {"rpm": 1}), 0)

    async def test_wait_sleeps_for_the_refill(self):
        entity, resource = uid("key"), uid("res")
        first = await self.client.wait(entity, resource, {"rps": 1}, 5, limits=["rps:1/sec"])
        start = time.monotonic()
        second = await self.client.wait(entity, resource, {"rps": 1}, 5, limits=["rps:1/sec"])
        self.assertGreater(time.monotonic() - start, 0.3)
        await first.commit()
        await second.commit()
        with self.assertRaises(tollgate.RateLimitExceeded):
            await self.client.wait(entity, resource, {"rps": 1}, 0.1, limits=["rps:1/sec"])  # too short: at once

    async def test_wait_on_a_full_slot_woken_at_once_by_a_release_of_the_same_client(self):
        entity, resource = uid("key"), uid("res")
        limits = ["slots:1/concurrent"]
        held = await self.client.acquire(entity, resource, {"slots": 1}, limits=limits, lease_ttl=600)
        waiter = asyncio.ensure_future(self.client.wait(entity, resource, {"slots": 1}, 10, limits=limits))
        while not self.client._releases._events:  # the waiter is in line
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)  # most likely refused and asleep by now (a release during its acquire wakes it too)
        released = time.monotonic()
        await held.commit()
        lease = await asyncio.wait_for(waiter, 10)
        self.assertLess(time.monotonic() - released, 0.5, "woken by the release, not by its next look a second later")
        await lease.commit()

    async def test_concurrent_calls_share_the_pool(self):
        resource = self.limits_resource(["calls:20/day"])
        entity = uid("key")
        grants = await asyncio.gather(*(self.client.acquire_and_commit(entity, resource, {"calls": 1}) for _ in range(20)))
        self.assertEqual(len(grants), 20)
        with self.assertRaises(tollgate.RateLimitExceeded):
            await self.client.acquire_and_commit(entity, resource, {"calls": 1})
        self.assertLessEqual(len(self.client._http._idle), 16)
        self.assertGreater(len(self.client._http._idle), 0)  # kept alive for the next calls

    async def test_connections_are_bounded(self):
        from tollgate import _aio_http

        resource = self.limits_resource(["calls:1000/day"])  # /day: no refill within the test
        entity = uid("key")
        writers, most = [], [0]
        real = asyncio.open_connection

        async def counting(*a, **kw):
            reader, writer = await real(*a, **kw)
            writers.append(writer)
            most[0] = max(most[0], sum(1 for w in writers if not w.is_closing()))
            return reader, writer

        n = _aio_http.MAX_CONNECTIONS + 36
        _aio_http.asyncio.open_connection = counting
        try:
            await asyncio.gather(*(self.client.acquire_and_commit(entity, resource, {"calls": 1}) for _ in range(n)))
        finally:
            _aio_http.asyncio.open_connection = real
        self.assertGreater(most[0], 16)  # more at once than are kept idle: the bound below is reached
        self.assertLessEqual(most[0], _aio_http.MAX_CONNECTIONS)  # never more open at once
        self.assertEqual(await self.available(entity, resource), {"calls": 1000 - n})

    async def test_lost_answer_is_sent_again_with_the_same_key(self):
        proxy = support.LossyProxy(support.server().url)
        client = tollgate.AsyncClient(proxy.url)
        try:
            resource = self.limits_resource(["rpm:10"])
            entity = uid("key")
            n0 = proxy.lose_next(1)
            lease = await client.acquire(entity, resource, {"rpm": 1})
            self.assertEqual(proxy.sent - n0, 2)
            self.assertIsNotNone(proxy.keys[-1])
            self.assertEqual(proxy.keys[-1], proxy.keys[-2])
            self.assertTrue(lease.replayed)
            n0 = proxy.lose_next(1)
            await lease.commit()  # the commit's answer is lost, and the repeat answered as the first
            self.assertEqual(proxy.sent - n0, 2)
            self.assertEqual(await self.available(entity, resource), {"rpm": 9})
        finally:
            await client.close()
            proxy.close()

    async def test_resume_lease_and_list_leases(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        lease = await self.client.acquire(entity, resource, {"rpm": 2})
        other = await self.client.resume_lease(lease.id)
        self.assertEqual((other.entity, other.consumed), (entity, {"rpm": 2}))
        page, nxt = await self.client.list_leases(entity)
        self.assertEqual(([x.lease_id for x in page], nxt), ([lease.id], None))
        await other.rollback()
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            await lease.commit()
        self.assertEqual(cm.exception.ended, "rolled_back")
        self.assertTrue(lease.closed)

    async def test_reservations(self):
        resource = self.limits_resource(["clusters:1/reserved"])
        entity = uid("team")
        rid = "arn:cluster/" + uid("j")
        first = await self.client.reserve(entity, resource, rid)
        again = await self.client.reserve(entity, resource, rid)
        self.assertEqual((first.new, again.new), (True, False))
        with self.assertRaises(tollgate.ReservationConflict):
            await self.client.reserve(uid("other"), resource, rid)
        with self.assertRaises(tollgate.RateLimitExceeded):
            await self.client.reserve(entity, resource, uid("j"))
        self.assertEqual((await self.client.get_reservation(rid)).entity, entity)
        self.assertEqual([r.id async for r in self.client.iter_reservations(entity)], [rid])
        await self.client.release(rid)
        with self.assertRaises(tollgate.ReservationNotFound):
            await self.client.release(rid)

    async def test_decorator_on_coroutine_functions(self):
        resource = self.limits_resource(["rpm:1"])
        entity = uid("key")
        ran = []

        @self.client.rate_limit(entity=tollgate.arg("user"), resource=resource, consume={"rpm": 1})
        async def fetch(x, user):
            """Fetches."""
            ran.append(x)
            return x * 2

        self.assertEqual(fetch.__doc__, "Fetches.")
        self.assertEqual(await fetch(21, entity), 42)
        with self.assertRaises(tollgate.RateLimitExceeded):
            await fetch(1, entity)
        self.assertEqual(ran, [21])

        other = uid("key")

        @self.client.rate_limit(entity=other, resource=resource, consume={"rpm": 1})
        async def broken():
            raise ValueError("no")

        with self.assertRaises(ValueError):
            await broken()
        self.assertEqual(await self.available(other, resource), {"rpm": 1})  # rolled back
        with self.assertRaises(tollgate.ValidationError):
            self.client.rate_limit(entity=other, resource=resource, consume={"rpm": 1})(lambda: None)

    async def test_admin_calls_and_health(self):
        self.assertEqual(await self.client.health(), "ok")
        self.assertEqual(await self.client.ready(), "ready")
        eid = uid("org")
        created = await self.client.create_entity(eid, name="Org")
        self.assertEqual((await self.client.get_entity(eid)).name, created.name)
        resource = uid("res")
        await self.client.set_limits(["rpm:5"], entity=eid, resource=resource)
        found = [c async for c in self.client.iter_limits() if c.entity == eid]
        self.assertEqual(len(found), 1)
        with self.assertRaises(tollgate.EntityNotFound):
            await self.client.get_entity(uid("nobody"))


class AsyncClientAcrossLoopsTest(unittest.TestCase):
    def test_one_client_in_successive_event_loops(self):
        # Connections belong to the loop that opened them: a client used by
        # successive asyncio.run calls opens new ones in each.
        client = tollgate.AsyncClient(support.server().url)
        with warnings.catch_warnings():
            # The connections a finished loop left idle are dropped, closed
            # by the garbage collector (a ResourceWarning): the README says
            # to close the client before its loop ends.
            warnings.simplefilter("ignore", ResourceWarning)
            for _ in range(3):
                self.assertEqual(asyncio.run(client.health()), "ok")
            self.assertEqual(len(client._http._idle), 1)
            gc.collect()

        async def twice():
            await client.health()
            first = client._http._idle[0]
            await client.health()
            self.assertIs(client._http._idle[0], first)  # kept alive and reused
            await client.close()

        asyncio.run(twice())


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers `answer` (status, headers, body); chunked when the test asks."""

    protocol_version = "HTTP/1.1"
    answer = (200, {}, b"", False)

    def _reply(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        status, headers, body, chunked = type(self).answer
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 1000):
                part = body[i:i + 1000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    do_GET = do_POST = _reply

    def log_message(self, *args):
        pass


class AsyncStubTest(unittest.IsolatedAsyncioTestCase):
    """Answers framed as a Go server or a proxy may frame them."""

    @classmethod
    def setUpClass(cls):
        cls.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        cls.httpd.daemon_threads = True
        cls.httpd.handle_error = lambda *a: None  # the client hung up on an oversized answer
        cls.thread = threading.Thread(target=cls.httpd.serve_forever, daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.httpd.shutdown()
        cls.httpd.server_close()
        cls.thread.join(5)

    async def asyncSetUp(self):
        asyncio.get_running_loop().slow_callback_duration = 2  # debug mode: a loaded machine is slow
        self.client = tollgate.AsyncClient(f"http://127.0.0.1:{self.httpd.server_address[1]}", timeout=5)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_chunked_answer(self):
        _Stub.answer = (200, {}, b'{"status":"' + b"o" * 5000 + b'"}', True)
        self.assertEqual(await self.client.health(), "o" * 5000)
        self.assertEqual(await self.client.health(), "o" * 5000)  # on the kept-alive connection

    async def test_plain_429_takes_retry_after_header(self):
        _Stub.answer = (429, {"Retry-After": "3"}, b"slow down", False)
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            await self.client.acquire("k", "r", {"rpm": 1})
        self.assertEqual((cm.exception.retry_after, cm.exception.statuses), (3.0, []))

    async def test_oversized_answers_are_bad_responses(self):
        big = b'{"status":"' + b"x" * (tollgate.MAX_RESPONSE_BYTES + 10) + b'"}'
        for chunked in (False, True):
            _Stub.answer = (200, {}, big, chunked)
            with self.assertRaises(tollgate.BadResponse) as cm:
                await self.client.health()
            self.assertIn("larger than", str(cm.exception))

    async def test_silent_server_times_out(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            client = tollgate.AsyncClient(f"http://127.0.0.1:{s.getsockname()[1]}", timeout=0.5)
            start = time.monotonic()
            with self.assertRaises(tollgate.ServerUnreachable) as cm:
                await client.acquire("k", "r", {"rpm": 1})
            self.assertLess(time.monotonic() - start, 5)
            self.assertIn("timed out", str(cm.exception))
            await client.close()

    async def test_control_characters_never_reach_the_wire(self):
        client = tollgate.AsyncClient(f"http://127.0.0.1:{self.httpd.server_address[1]}", api_key="k\r\nX-Evil: 1")
        with self.assertRaises(tollgate.ValidationError) as cm:
            await client.health()
        self.assertEqual(cm.exception.field, "headers")
        await client.close()

    async def test_closed_port_is_server_unreachable(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = tollgate.AsyncClient(f"http://127.0.0.1:{port}", timeout=2)
        with self.assertRaises(tollgate.ServerUnreachable) as cm:
            await client.health()
        self.assertIn("refused", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
