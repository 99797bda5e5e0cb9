"""Retries are safe: idempotency keys on acquires, calls sent again when
their answer is lost (through a proxy that loses answers after the server
acted), and how a lease that has ended says so, against a real tollgate
serve."""

from __future__ import annotations

import time
import unittest

import support
from support import LossyProxy, ServerTest, uid

import tollgate


class LostAnswersTest(ServerTest):
    """A client behind a proxy that can lose the server's answers."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.proxy = LossyProxy(support.server().url)
        cls.lossy = tollgate.Client(cls.proxy.url)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.proxy.close()

    def test_acquire_and_commit_whose_answer_is_lost_is_granted_once(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        before = self.proxy.lose_next(1)
        grant = self.lossy.acquire_and_commit(entity, resource, {"rpm": 3})
        self.assertTrue(grant.replayed)
        self.assertEqual(grant.consumed, {"rpm": 3})
        self.assertEqual(grant.statuses, [])  # a replayed grant has none
        self.assertEqual(self.proxy.sent - before, 2)
        first, second = self.proxy.keys[before:]
        self.assertRegex(first, r"^tgc-[0-9a-f]{32}$")
        self.assertEqual(first, second)
        self.assertEqual(self.available(entity, resource), {"rpm": 7})  # debited once

        # Another call is another key: granted, not replayed.
        grant = self.lossy.acquire_and_commit(entity, resource, {"rpm": 1})
        self.assertFalse(grant.replayed)
        self.assertNotEqual(self.proxy.keys[-1], first)
        self.assertEqual(self.available(entity, resource), {"rpm": 6})

    def test_acquire_whose_answer_is_lost_replays_the_lease(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        self.proxy.lose_next(1)
        lease = self.lossy.acquire(entity, resource, {"rpm": 2})
        self.assertTrue(lease.replayed)
        self.assertEqual(lease.consumed, {"rpm": 2})
        self.assertEqual(lease.statuses, [])
        self.assertEqual(self.available(entity, resource), {"rpm": 8})
        lease.commit()
        self.assertEqual(self.available(entity, resource), {"rpm": 8})

    def test_commit_and_rollback_whose_answers_are_lost_are_done(self):
        resource = self.limits_resource(["rpm:10", "inflight:2/concurrent"])
        entity = uid("key")
        lease = self.lossy.acquire(entity, resource, {"rpm": 2, "inflight": 1})
        self.assertFalse(lease.replayed)
        before = self.proxy.lose_next(1)
        lease.commit()  # the second send is answered as the first commit
        self.assertEqual(self.proxy.sent - before, 2)
        self.assertEqual(lease.state, "committed")

        lease = self.lossy.acquire(entity, resource, {"rpm": 3, "inflight": 1})
        before = self.proxy.lose_next(1)
        lease.rollback()  # the second send finds it rolled back: done
        self.assertEqual(self.proxy.sent - before, 2)
        self.assertEqual(lease.state, "rolled_back")
        self.assertEqual(self.available(entity, resource), {"rpm": 8, "inflight": 2})

    def test_extend_whose_answer_is_lost_is_sent_again(self):
        resource = self.limits_resource(["rpm:10"])
        lease = self.lossy.acquire(uid("key"), resource, {"rpm": 1}, lease_ttl=5)
        first = lease.expires_at
        before = self.proxy.lose_next(1)
        lease.extend(600)
        self.assertEqual(self.proxy.sent - before, 2)
        self.assertGreater((lease.expires_at - first).total_seconds(), 500)
        lease.rollback()

    def test_adjust_whose_answer_is_lost_is_not_sent_again(self):
        resource = self.limits_resource(["rpm:10", "tpm:1000/day"])
        entity = uid("key")
        lease = self.lossy.acquire(entity, resource, {"rpm": 1, "tpm": 100})
        before = self.proxy.lose_next(1)
        with self.assertRaises(tollgate.ServerUnreachable):
            lease.adjust({"tpm": 50})
        self.assertEqual(self.proxy.sent - before, 1)  # adds up: sent once
        self.assertFalse(lease.closed)
        lease.refresh()
        self.assertEqual(lease.consumed, {"rpm": 1, "tpm": 150})  # the server did it, once
        lease.commit()
        self.assertEqual(self.available(entity, resource), {"rpm": 9, "tpm": 850})

    def test_reads_are_sent_again(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        before = self.proxy.lose_next(1)
        self.assertEqual({s.limit: s.available for s in self.lossy.available(entity, resource)}, {"rpm": 10})
        self.assertEqual(self.proxy.sent - before, 2)

    def test_at_most_three_sends(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        before = self.proxy.lose_next(5)
        with self.assertRaises(tollgate.ServerUnreachable):
            self.lossy.acquire_and_commit(entity, resource, {"rpm": 1})
        self.assertEqual(self.proxy.sent - before, 3)
        self.assertEqual(len(set(self.proxy.keys[before:])), 1)
        self.proxy.lose_next(0)
        self.assertEqual(self.available(entity, resource), {"rpm": 9})  # granted once, however often sent

    def test_sends_again_within_the_timeout(self):
        # 0.1 s leaves room for the 50 ms pause before the second send, not
        # for the 200 ms one before a third.
        # A proxy of its own: the send the client gave up on may reach it
        # after this test, and must not count as a later test's send.
        proxy = LossyProxy(support.server().url)
        self.addCleanup(proxy.close)
        client = tollgate.Client(proxy.url, timeout=0.1)
        resource = self.limits_resource(["rpm:10"])
        proxy.lose_next(5)
        start = time.monotonic()
        with self.assertRaises(tollgate.ServerUnreachable):
            client.acquire_and_commit(uid("key"), resource, {"rpm": 1})
        self.assertLessEqual(proxy.sent, 2)
        self.assertLess(time.monotonic() - start, 0.2)

    def test_without_idempotency_keys_no_key_and_no_acquire_sent_again(self):
        client = tollgate.Client(self.proxy.url, idempotency_keys=False)
        resource = self.limits_resource(["rpm:10"])
        before = self.proxy.lose_next(1)
        with self.assertRaises(tollgate.ServerUnreachable):
            client.acquire_and_commit(uid("key"), resource, {"rpm": 1})
        self.assertEqual(self.proxy.sent - before, 1)
        self.assertEqual(self.proxy.keys[before:], [None])

        # A key the caller gives is still sent, and the acquire sent again.
        entity = uid("key")
        before = self.proxy.lose_next(1)
        grant = client.acquire_and_commit(entity, resource, {"rpm": 1}, idempotency_key=uid("order"))
        self.assertTrue(grant.replayed)
        self.assertEqual(self.proxy.sent - before, 2)
        self.assertEqual(self.available(entity, resource), {"rpm": 9})


class IdempotencyKeyTest(ServerTest):
    def test_the_callers_key_replays_its_grant(self):
        resource = self.limits_resource(["rpm:10"])
        entity, key = uid("key"), uid("order")
        lease = self.client.acquire(entity, resource, {"rpm": 2}, idempotency_key=key)
        self.assertFalse(lease.replayed)
        again = self.client.acquire(entity, resource, {"rpm": 2}, idempotency_key=key)
        self.assertTrue(again.replayed)
        self.assertEqual(again.id, lease.id)
        self.assertEqual(self.available(entity, resource), {"rpm": 8})
        lease.commit()
        # The lease it granted has ended: the key says how.
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            self.client.acquire(entity, resource, {"rpm": 2}, idempotency_key=key)
        e = cm.exception
        self.assertEqual((e.status, e.reason, e.ended), (409, "lease_closed", "committed"))
        self.assertIsInstance(e, tollgate.LeaseClosed)

        key = uid("order")
        first = self.client.acquire_and_commit(entity, resource, {"rpm": 1}, idempotency_key=key)
        second = self.client.acquire_and_commit(entity, resource, {"rpm": 1}, idempotency_key=key)
        self.assertEqual((first.replayed, second.replayed), (False, True))
        self.assertEqual(second.consumed, {"rpm": 1})
        self.assertEqual(self.available(entity, resource), {"rpm": 7})

    def test_the_same_key_with_another_request_is_a_conflict(self):
        resource = self.limits_resource(["rpm:10"])
        entity, key = uid("key"), uid("order")
        self.client.acquire_and_commit(entity, resource, {"rpm": 1}, idempotency_key=key)
        with self.assertRaises(tollgate.IdempotencyConflict) as cm:
            self.client.acquire_and_commit(entity, resource, {"rpm": 2}, idempotency_key=key)
        e = cm.exception
        self.assertIsInstance(e, tollgate.Conflict)
        self.assertEqual((e.status, e.code, e.reason), (409, "conflict", "idempotency_key_reused"))
        with self.assertRaises(tollgate.IdempotencyConflict):
            self.client.acquire(uid("other"), resource, {"rpm": 1}, idempotency_key=key)
        self.assertEqual(self.available(entity, resource), {"rpm": 9})  # nothing more debited


class EndedLeaseTest(ServerTest):
    def test_a_committed_lease_through_other_handles(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 1})
        second, third = self.client.resume_lease(lease.id), support.client().resume_lease(lease.id)
        lease.commit()
        second.commit()  # committed already: answered as the first commit
        self.assertEqual(second.state, "committed")
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            third.rollback()
        e = cm.exception
        self.assertEqual((e.status, e.code, e.reason, e.ended), (409, "conflict", "lease_closed", "committed"))
        self.assertIsInstance(e, tollgate.LeaseClosed)
        self.assertNotIsInstance(e, tollgate.LeaseNotFound)
        self.assertTrue(third.closed)
        self.assertEqual(third.state, "closed")
        with self.assertRaises(tollgate.LeaseClosed):
            third.rollback()  # no call now
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            self.client.resume_lease(lease.id)
        self.assertEqual(cm.exception.ended, "committed")
        self.assertEqual(self.available(entity, resource), {"rpm": 9})

    def test_a_rolled_back_lease_through_other_handles(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 1})
        second, third, fourth = (self.client.resume_lease(lease.id) for _ in range(3))
        lease.rollback()
        second.rollback()  # rolled back already: done
        self.assertEqual(second.state, "rolled_back")
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            third.commit()
        self.assertEqual(cm.exception.ended, "rolled_back")
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            fourth.refresh()
        self.assertEqual(cm.exception.ended, "rolled_back")
        self.assertTrue(fourth.closed)
        self.assertEqual(self.available(entity, resource), {"rpm": 10})


if __name__ == "__main__":
    unittest.main()
