"""wait(): retry after the server's retry_after until granted or max_wait."""

from __future__ import annotations

import time
import unittest

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

    def test_other_errors_are_raised_at_once(self):
        with self.assertRaises(tollgate.ValidationError):
            self.client.wait(uid("key"), uid("res"), {"rpm": 1}, 5)  # no limits anywhere


if __name__ == "__main__":
    unittest.main()
