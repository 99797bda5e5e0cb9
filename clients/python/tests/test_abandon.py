"""Acquires of unknown outcome are abandoned (docs/semantics.md 8): the
client rolls back, in the background, the lease of an acquire whose key it
made up and whose answer it never learned, against a real tollgate serve
(through a proxy that loses answers after the server acted) and, for the
answers such a server cannot be made to give (5xx, degraded), over a
stand-in transport."""

from __future__ import annotations

import asyncio
import queue
import threading
import unittest
from typing import Any, List
from unittest import mock

import support
from support import LossyProxy, ServerTest, uid

import tollgate
from tollgate import _abandon
from tollgate import errors as E
from tollgate._http import Answer

#: model.IdempotentLeaseID("tgc-00000000000000000000000000000000"), printed
#: by a Go program (go run) on the Go module.
GO_KEY = "tgc-00000000000000000000000000000000"
GO_LEASE_ID = "952c5a0b8e25854a3411c2fe44e5e437"

SLOT = ["conns:1/concurrent"]
WAIT = 10  # seconds, at most, for an abandonment's report


def _rollbacks(proxy: LossyProxy, lease_id: str) -> int:
    return proxy.paths.count(f"/v1/leases/{lease_id}/rollback")


class LeaseIdTest(unittest.TestCase):
    def test_the_lease_id_of_a_key_is_gos(self):
        self.assertEqual(_abandon.idempotent_lease_id(GO_KEY), GO_LEASE_ID)

    def test_unknown_outcomes(self):
        cases = [
            (E.ServerUnreachable("no answer"), True),
            (E.Unavailable("store down", status=503), True),
            (E.ServerError("internal", status=500), True),
            (E.Unavailable("bad gateway", status=502), True),
            (E.BadResponse("unreadable grant", status=200), True),
            (E.BadResponse("answer too large"), True),
            (asyncio.CancelledError(), True),
            (E.RateLimitExceeded("denied", status=429, retry_after=1.0, statuses=[]), False),
            (E.ValidationError("bad consume", status=400), False),
            (E.ValidationError("bad key"), False),  # raised before anything was sent
            (E.Unauthorized("no key", status=401), False),
            (E.Forbidden("wrong role", status=403), False),
            (E.NotFound("no namespace", status=404), False),
            (E.IdempotencyConflict("reused", status=409), False),
            (E.LeaseEnded("ended", status=409, ended="committed"), False),
            (KeyError("not the client's"), False),
        ]
        for err, want in cases:
            with self.subTest(err=repr(err)):
                self.assertEqual(_abandon.unknown_outcome(err), want)


class AbandonerTest(unittest.TestCase):
    """The rollbacks' schedule and outcomes, over a stand-in rollback."""

    def test_outcomes(self):
        not_found = E.LeaseNotFound("no such lease", status=404)
        down = E.ServerUnreachable("no answer")
        cases = [
            ("rolled back", [None], "ended", 1),
            ("ended already", [E.LeaseEnded("ended", status=409, ended="committed")], "ended", 1),
            ("landed late", [not_found, not_found, None], "ended", 3),
            ("never granted", [not_found] * 4, "not_found", 4),
            ("never answered", [down] * 4, "failed", 4),
            ("answered, then not", [not_found] * 3 + [down], "failed", 4),
            ("not answered, then not found", [down] * 3 + [not_found], "not_found", 4),
        ]
        for name, answers, outcome, tries in cases:
            with self.subTest(name):
                sent: List[str] = []
                left = list(answers)

                def rollback(lease_id: str) -> None:
                    sent.append(lease_id)
                    err = left.pop(0)
                    if err is not None:
                        raise err

                reports: "queue.Queue[tollgate.Abandoned]" = queue.Queue()
                ab = _abandon.Abandoner(rollback, reports.put)
                ab.delays = (0.001, 0.001, 0.001)
                ab.abandon(GO_KEY, "k", "db")
                got = reports.get(timeout=WAIT)
                self.assertEqual((got.lease_id, got.entity, got.resource, got.outcome),
                                 (GO_LEASE_ID, "k", "db", outcome))
                self.assertEqual(sent, [GO_LEASE_ID] * tries)
                self.assertIs(got.error, down if outcome == "failed" else None)

    def test_beyond_the_bound_dropped(self):
        release = threading.Event()
        reports: "queue.Queue[tollgate.Abandoned]" = queue.Queue()
        ab = _abandon.Abandoner(lambda _id: release.wait(WAIT), reports.put)
        for i in range(tollgate.MAX_ABANDONING + 1):
            ab.abandon(f"tgc-{i}", "k", "db")
        first = reports.get(timeout=WAIT)  # only the one beyond can end before the release
        self.assertEqual((first.outcome, first.lease_id), ("dropped", _abandon.idempotent_lease_id(f"tgc-{tollgate.MAX_ABANDONING}")))
        release.set()
        outcomes = [reports.get(timeout=WAIT).outcome for _ in range(tollgate.MAX_ABANDONING)]
        self.assertEqual(outcomes, ["ended"] * tollgate.MAX_ABANDONING)
        ab.abandon("tgc-again", "k", "db")  # the slots were given back
        self.assertEqual(reports.get(timeout=WAIT).outcome, "ended")


class AbandonTest(ServerTest):
    """A client behind a proxy that loses the server's answers."""

    def setUp(self) -> None:
        # A proxy of its own per test: a rollback in the background must
        # not count as another test's send.
        self.proxy = LossyProxy(support.server().url)
        self.addCleanup(self.proxy.close)
        self.reports: "queue.Queue[tollgate.Abandoned]" = queue.Queue()
        self.lossy = tollgate.Client(self.proxy.url, on_abandon=self.reports.put)
        self.lossy._abandoner.delays = (0.01, 0.01, 0.01)

    def slot_free(self, entity: str, resource: str) -> bool:
        """Whether the slot can be acquired (directly); gives it back."""
        try:
            self.client.acquire(entity, resource, {"conns": 1}).commit()
        except tollgate.RateLimitExceeded:
            return False
        return True

    def test_a_slot_whose_answers_are_lost_comes_back(self):
        resource, entity = self.limits_resource(SLOT), uid("key")
        before = self.proxy.lose_next(3)
        with self.assertRaises(tollgate.ServerUnreachable):
            self.lossy.acquire(entity, resource, {"conns": 1})
        got = self.reports.get(timeout=WAIT)
        key = self.proxy.keys[before]
        self.assertEqual(self.proxy.keys[before:before + 3], [key] * 3)  # every try's answer lost
        self.assertEqual((got.lease_id, got.entity, got.resource, got.outcome, got.error),
                         (_abandon.idempotent_lease_id(key), entity, resource, "ended", None))
        self.assertEqual(_rollbacks(self.proxy, got.lease_id), 1)
        self.assertTrue(self.slot_free(entity, resource))  # not held for the lease's 5 minutes

    def test_a_rollback_without_answer_is_sent_again_after_a_delay(self):
        resource, entity = self.limits_resource(SLOT), uid("key")
        self.proxy.lose_next(6)  # the acquire's 3 sends, and the first rollback's 3
        with self.assertRaises(tollgate.ServerUnreachable):
            self.lossy.acquire_and_commit(entity, resource, {"conns": 1})
        got = self.reports.get(timeout=WAIT)
        self.assertEqual(got.outcome, "ended")
        self.assertEqual(_rollbacks(self.proxy, got.lease_id), 4)

    def test_the_callers_key_is_not_abandoned(self):
        resource, entity, key = self.limits_resource(SLOT), uid("key"), uid("order")
        with mock.patch.object(self.lossy._abandoner, "abandon", wraps=self.lossy._abandoner.abandon) as abandon:
            self.proxy.lose_next(3)
            with self.assertRaises(tollgate.ServerUnreachable):
                self.lossy.acquire(entity, resource, {"conns": 1}, idempotency_key=key)
            again = self.lossy.acquire(entity, resource, {"conns": 1}, idempotency_key=key)
            self.assertTrue(again.replayed)  # the first grant, found again
            self.assertEqual(again.id, _abandon.idempotent_lease_id(key))
            self.assertFalse(self.slot_free(entity, resource))
            again.commit()
        abandon.assert_not_called()
        self.assertNotIn("rollback", " ".join(self.proxy.paths))
        self.assertTrue(self.reports.empty())

    def test_without_idempotency_keys_nothing_is_abandoned(self):
        client = tollgate.Client(self.proxy.url, idempotency_keys=False, on_abandon=self.reports.put)
        resource, entity = self.limits_resource(SLOT), uid("key")
        with mock.patch.object(client._abandoner, "abandon") as abandon:
            self.proxy.lose_next(1)
            with self.assertRaises(tollgate.ServerUnreachable):
                client.acquire(entity, resource, {"conns": 1})
        abandon.assert_not_called()
        self.assertFalse(self.slot_free(entity, resource))  # held until its expiry, as before

    def test_refusals_and_bad_input_are_not_abandoned(self):
        resource, entity = self.limits_resource(SLOT), uid("key")
        held = self.client.acquire(entity, resource, {"conns": 1})
        with mock.patch.object(self.lossy._abandoner, "abandon") as abandon:
            with self.assertRaises(tollgate.RateLimitExceeded):
                self.lossy.acquire(entity, resource, {"conns": 1})
            with self.assertRaises(tollgate.ValidationError):
                self.lossy.acquire(entity, resource, {"conns": 2})  # above the capacity: a 400
            with self.assertRaises(tollgate.ValidationError):
                self.lossy.acquire(entity, resource, {"conns": -1})  # never sent
        abandon.assert_not_called()
        held.commit()

    def test_answers_of_unknown_outcome(self):
        """Over a stand-in for the acquire's send: which answers abandon."""
        grant = {"lease_id": "x", "consumed": {"conns": 1}, "limits": []}
        cases = [
            ("503", E.Unavailable("store down", status=503, code="unavailable"), True),
            ("500", E.ServerError("internal", status=500), True),
            ("unreadable 200", Answer(200, ["not", "an", "object"], {}), True),
            ("degraded grant", Answer(200, dict(grant, degraded=True), {}), True),
            ("grant", Answer(200, grant, {}), False),
            ("429", E.RateLimitExceeded("denied", status=429, retry_after=1.0, statuses=[]), False),
            ("409", E.LeaseEnded("ended", status=409, ended="rolled_back"), False),
        ]
        for name, answer, abandoned in cases:
            with self.subTest(name):
                sent: List[str] = []

                def send(method: str, path: str, **kw: Any) -> Answer:
                    sent.append(path)
                    if path.endswith("/rollback"):
                        return Answer(204, None, {})
                    if isinstance(answer, Exception):
                        raise answer
                    return answer

                client = tollgate.Client(support.server().url, on_abandon=self.reports.put)
                with mock.patch.object(client._http, "send", side_effect=send):
                    try:
                        client.acquire_and_commit("k", "db", {"conns": 1})
                    except E.TollgateError:
                        pass
                    if abandoned:
                        got = self.reports.get(timeout=WAIT)
                        self.assertEqual((got.entity, got.resource, got.outcome), ("k", "db", "ended"))
                        self.assertEqual(sent[1], f"/v1/leases/{got.lease_id}/rollback")
                self.assertEqual(len(sent), 2 if abandoned else 1)


class AsyncAbandonTest(unittest.IsolatedAsyncioTestCase):
    """AsyncClient behind a proxy that loses (or holds) the answers."""

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 2  # debug mode: a loaded machine is slow
        self.sync = support.client()
        self.proxy = LossyProxy(support.server().url)
        self.reports: "asyncio.Queue[tollgate.Abandoned]" = asyncio.Queue()
        self.lossy = tollgate.AsyncClient(self.proxy.url, on_abandon=self.reports.put_nowait)
        self.lossy._abandoner.delays = (0.01, 0.01, 0.01)

    async def asyncTearDown(self) -> None:
        await self.lossy.close()
        await asyncio.to_thread(self.proxy.close)

    def slot_free(self, entity: str, resource: str) -> bool:
        try:
            self.sync.acquire(entity, resource, {"conns": 1}).commit()
        except tollgate.RateLimitExceeded:
            return False
        return True

    def slot(self) -> str:
        resource = uid("res")
        self.sync.set_limits(SLOT, resource=resource)
        return resource

    async def test_a_slot_whose_answers_are_lost_comes_back(self):
        resource, entity = self.slot(), uid("key")
        before = self.proxy.lose_next(3)
        with self.assertRaises(tollgate.ServerUnreachable):
            await self.lossy.acquire(entity, resource, {"conns": 1})
        got = await asyncio.wait_for(self.reports.get(), WAIT)
        key = self.proxy.keys[before]
        self.assertEqual((got.lease_id, got.entity, got.resource, got.outcome, got.error),
                         (_abandon.idempotent_lease_id(key), entity, resource, "ended", None))
        self.assertEqual(_rollbacks(self.proxy, got.lease_id), 1)
        self.assertTrue(self.slot_free(entity, resource))

    async def test_a_task_cancelled_in_flight_is_abandoned(self):
        resource, entity = self.slot(), uid("key")
        self.proxy.hold_next()
        task = asyncio.ensure_future(self.lossy.acquire(entity, resource, {"conns": 1}))
        self.assertTrue(await asyncio.to_thread(self.proxy.acted.wait, WAIT))  # granted, its answer held
        self.assertFalse(self.slot_free(entity, resource))
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        got = await asyncio.wait_for(self.reports.get(), WAIT)
        self.assertEqual((got.entity, got.outcome), (entity, "ended"))
        self.assertTrue(self.slot_free(entity, resource))

    async def test_the_callers_key_is_not_abandoned(self):
        resource, entity, key = self.slot(), uid("key"), uid("order")
        with mock.patch.object(self.lossy._abandoner, "abandon") as abandon:
            self.proxy.lose_next(3)
            with self.assertRaises(tollgate.ServerUnreachable):
                await self.lossy.acquire(entity, resource, {"conns": 1}, idempotency_key=key)
            again = await self.lossy.acquire(entity, resource, {"conns": 1}, idempotency_key=key)
            self.assertTrue(again.replayed)
            await again.commit()
        abandon.assert_not_called()
        self.assertNotIn("rollback", " ".join(self.proxy.paths))


if __name__ == "__main__":
    unittest.main()
