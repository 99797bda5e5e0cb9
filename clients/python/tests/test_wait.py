"""wait(): retry after the server's retry_after until granted or max_wait."""

from __future__ import annotations

import threading
import time
import unittest

import support
from support import ServerTest, uid

import tollgate


class WaitTest(ServerTest):
    def test_granted_after_refill(self):
        entity, resource = uid("key"), uid("res")
        limits = ["rps:1/sec"]
        self.client.acquire_and_commit(entity, resource, {"rps": 1}, limits=limits)
        with self.assertRaises(tollgate.RateLimitExceeded):
            self.client.acquire(entity, resource, {"rps": 1}, limits=limits)
        start = time.monotonic()
        lease = self.client.wait(entity, resource, {"rps": 1}, 5, limits=limits)
        waited = time.monotonic() - start
        self.assertIsInstance(lease, tollgate.Lease)
        self.assertGreater(waited, 0.3)  # it did wait for the refill
        self.assertLess(waited, 3)
        lease.commit()

    def test_gives_up_at_once_when_max_wait_is_too_short(self):
        entity, resource = uid("key"), uid("res")
        limits = ["rpm:1"]  # the next token in about 60 s
        self.client.acquire_and_commit(entity, resource, {"rpm": 1}, limits=limits)
        start = time.monotonic()
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.wait(entity, resource, {"rpm": 1}, 2, limits=limits)
        self.assertLess(time.monotonic() - start, 1.5)  # did not sleep in vain
        self.assertGreater(cm.exception.retry_after, 2)

    def test_full_slot_costs_about_one_acquire_a_second(self):
        # Issue 21: wait(..., 3) on a full slot made 28 acquires in 2.9 s,
        # one per 100 ms hint. About one a second, and one more at the end.
        entity, resource = uid("key"), uid("res")
        limits = ["slots:1/concurrent"]
        held = self.client.acquire(entity, resource, {"slots": 1}, limits=limits)
        calls = []

        def counted(*args, **kwargs):
            calls.append(time.monotonic())
            return acquire(*args, **kwargs)

        waiter = support.client()
        acquire = waiter.acquire
        waiter.acquire = counted  # type: ignore[method-assign]
        try:
            start = time.monotonic()
            with self.assertRaises(tollgate.RateLimitExceeded) as cm:
                waiter.wait(entity, resource, {"slots": 1}, 3, limits=limits)
            waited = time.monotonic() - start
        finally:
            held.commit()
        self.assertGreaterEqual(waited, 2.9)  # it waited the whole 3 s: a slot may come back
        self.assertLessEqual(len(calls), 4, f"{len(calls)} acquires in {waited:.1f} s")
        self.assertGreaterEqual(len(calls), 3)
        self.assertEqual(cm.exception.exceeded[0].kind, "concurrency")
        self.assertEqual(cm.exception.waits, "expiry")  # the holder's lease expires in minutes

    def test_full_slot_granted_soon_after_a_release(self):
        entity, resource = uid("key"), uid("res")
        limits = ["slots:1/concurrent"]
        held = self.client.acquire(entity, resource, {"slots": 1}, limits=limits)
        timer = threading.Timer(0.5, held.commit)
        timer.start()
        try:
            start = time.monotonic()
            lease = self.client.wait(entity, resource, {"slots": 1}, 10, limits=limits)
            waited = time.monotonic() - start
        finally:
            timer.join()
        lease.commit()
        self.assertLess(waited, 2.5)  # the next look, about a second after the first

    def test_full_slot_woken_at_once_by_a_release_of_the_same_client(self):
        entity, resource = uid("key"), uid("res")
        limits = ["slots:1/concurrent"]
        held = self.client.acquire(entity, resource, {"slots": 1}, limits=limits, lease_ttl=600)
        calls = []
        acquire = self.client.acquire

        refused = threading.Event()

        def counting(*a, **kw):
            calls.append(time.monotonic())
            try:
                return acquire(*a, **kw)
            except tollgate.RateLimitExceeded:
                refused.set()
                raise

        self.client.acquire = counting
        released = []

        def release():
            # Once refused, the waiter sleeps until a release it has not
            # seen: one between its refusal and its sleep counts too.
            refused.wait(10)
            released.append(time.monotonic())
            held.commit()

        timer = threading.Thread(target=release)
        timer.start()
        try:
            lease = self.client.wait(entity, resource, {"slots": 1}, 10, limits=limits)
        finally:
            timer.join()
            del self.client.acquire
        lease.commit()
        self.assertEqual(len(calls), 2, "refused, then granted once woken")
        self.assertLess(calls[1] - released[0], 0.5, "woken by the release, not by its next look a second later")

    def test_other_errors_are_raised_at_once(self):
        with self.assertRaises(tollgate.ValidationError):
            self.client.wait(uid("key"), uid("res"), {"rpm": 1}, 5)  # no limits anywhere


if __name__ == "__main__":
    unittest.main()
