"""Penalize: a vendor's 429 empties the limits for every caller."""

from __future__ import annotations

import unittest
from datetime import datetime, timedelta, timezone

from support import ServerTest, uid

import tollgate


class PenalizeTest(ServerTest):
    def test_penalize_then_rate_limited(self):
        resource = self.limits_resource(["rpm:100", "tpm:10000"])
        entity = uid("key")
        self.client.penalize(entity, resource, ["rpm", "tpm"], retry_after=30, reason="openai 429")
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire(entity, resource, {"rpm": 1})
        self.assertGreaterEqual(cm.exception.retry_after, 29)
        rpm = [s for s in cm.exception.statuses if s.limit == "rpm"][0]
        self.assertLess(rpm.available, 1)
        events, _ = self.client.audit_events(entity)
        self.assertIn("limit.penalize", [e.action for e in events])

    def test_penalize_until_and_through_a_lease(self):
        resource = self.limits_resource(["rpm:100", "tpm:10000"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 1, "tpm": 10})
        lease.penalize(["tpm"], until=datetime.now(timezone.utc) + timedelta(seconds=20))
        lease.commit()
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire(entity, resource, {"tpm": 1})
        self.assertGreater(cm.exception.retry_after, 15)
        self.client.acquire_and_commit(entity, resource, {"rpm": 1})  # rpm untouched

    def test_reset_lifts_a_penalty(self):
        resource = self.limits_resource(["rpm:100", "tpm:10000", "inflight:2/concurrent"])
        entity = uid("key")
        self.client.penalize(entity, resource, ["rpm", "tpm"], retry_after=60, reason="openai 429")
        with self.assertRaises(tollgate.RateLimitExceeded):
            self.client.acquire(entity, resource, {"rpm": 1})
        self.client.reset(entity, resource, limits=["rpm"], reason="vendor back")
        self.client.acquire_and_commit(entity, resource, {"rpm": 1})  # rpm refilled
        with self.assertRaises(tollgate.RateLimitExceeded):
            self.client.acquire(entity, resource, {"tpm": 1})  # tpm still penalized
        self.client.reset(entity, resource)  # every refilling limit
        self.client.acquire_and_commit(entity, resource, {"rpm": 1, "tpm": 100})
        # Refilled (and refilling since): 10000 less the 100 just taken, give or take refill.
        self.assertGreaterEqual(self.available(entity, resource)["tpm"], 9900)
        events, _ = self.client.audit_events(entity)
        self.assertEqual([e.action for e in events].count("limit.reset"), 2)

    def test_reset_validation(self):
        resource = self.limits_resource(["rpm:100", "inflight:2/concurrent"])
        entity = uid("key")
        self.client.acquire_and_commit(entity, resource, {"rpm": 1})
        for limits in (["inflight"], ["nope"]):  # not refilled by time; not held by the bucket
            with self.subTest(limits=limits):
                with self.assertRaises(tollgate.ValidationError) as cm:
                    self.client.reset(entity, resource, limits=limits)
                self.assertEqual(cm.exception.field, "limits")
        self.client.reset(uid("nobody"), resource)  # no bucket: full already

    def test_penalize_validation(self):
        resource = self.limits_resource(["rpm:100", "inflight:2/concurrent"])
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.penalize(uid("key"), resource, ["inflight"], retry_after=10)
        self.assertEqual(cm.exception.field, "limits")


if __name__ == "__main__":
    unittest.main()
