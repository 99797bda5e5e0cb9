"""Acquire, adjust, extend, commit, rollback and the lease context manager,
against a real tollgate serve."""

from __future__ import annotations

import threading
import unittest
from datetime import datetime, timedelta, timezone

import support
from support import ServerTest, uid

import tollgate


class AcquireTest(ServerTest):
    def test_acquire_adjust_commit(self):
        resource = self.limits_resource(["rpm:10", "tpm:10000/day:15000"])  # /day: no refill within a test
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 1, "tpm": 500})
        self.assertIsInstance(lease, tollgate.Lease)
        self.assertEqual(len(lease.id), 32)
        self.assertEqual((lease.entity, lease.resource, lease.state), (entity, resource, "open"))
        self.assertFalse(lease.degraded)
        self.assertEqual(lease.consumed, {"rpm": 1, "tpm": 500})
        self.assertGreater(lease.expires_at, datetime.now(timezone.utc))
        by_name = {s.limit: s for s in lease.statuses}
        self.assertEqual(by_name["tpm"].capacity, 15000)
        self.assertEqual(by_name["tpm"].available, 14500)
        self.assertEqual(by_name["rpm"].kind, "rate")
        self.assertFalse(by_name["rpm"].exceeded)

        lease.adjust({"tpm": 700})
        self.assertEqual(lease.consumed, {"rpm": 1, "tpm": 1200})
        # Adjustments reach the buckets at commit.
        self.assertEqual(self.available(entity, resource)["tpm"], 14500)
        lease.commit()
        self.assertEqual(lease.state, "committed")
        self.assertTrue(lease.closed)
        self.assertEqual(lease.consumed, {})
        self.assertEqual(self.available(entity, resource), {"rpm": 9, "tpm": 13800})

    def test_ended_lease_raises_lease_closed_without_a_call(self):
        resource = self.limits_resource(["rpm:10"])
        lease = self.client.acquire(uid("key"), resource, {"rpm": 1})
        lease.commit()
        for call in (lease.commit, lease.rollback, lambda: lease.adjust({"rpm": 1}), lambda: lease.extend(60)):
            with self.assertRaises(tollgate.LeaseClosed):
                call()

    def test_rollback_gives_everything_back(self):
        resource = self.limits_resource(["rpm:10", "tpm:1000/day"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 2, "tpm": 300})
        lease.adjust({"tpm": 100})
        self.assertEqual(self.available(entity, resource), {"rpm": 8, "tpm": 700})
        lease.rollback()
        self.assertEqual(lease.state, "rolled_back")
        self.assertEqual(self.available(entity, resource), {"rpm": 10, "tpm": 1000})

    def test_adjust_below_what_the_lease_took_names_the_field(self):
        resource = self.limits_resource(["tpm:1000"])
        lease = self.client.acquire(uid("key"), resource, {"tpm": 100})
        with self.assertRaises(tollgate.ValidationError) as cm:
            lease.adjust({"tpm": -101})
        self.assertEqual(cm.exception.field, "consume.tpm")
        self.assertEqual(lease.consumed, {"tpm": 100})  # nothing recorded; still open
        lease.rollback()

    def test_extend_moves_the_expiry(self):
        resource = self.limits_resource(["rpm:10"])
        lease = self.client.acquire(uid("key"), resource, {"rpm": 1}, lease_ttl=5)
        first = lease.expires_at
        self.assertLess(first - datetime.now(timezone.utc), timedelta(seconds=6))
        lease.extend(timedelta(minutes=10))
        self.assertGreater(lease.expires_at - first, timedelta(minutes=9))
        with self.assertRaises(tollgate.ValidationError) as cm:
            lease.extend(0)
        self.assertEqual(cm.exception.field, "ttl_ms")
        lease.commit()

    def test_another_handle_serves_the_lease(self):
        resource = self.limits_resource(["rpm:10", "tpm:1000/day"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 1, "tpm": 10})
        other = support.client().resume_lease(lease.id)
        self.assertEqual((other.entity, other.resource, other.consumed), (entity, resource, {"rpm": 1, "tpm": 10}))
        other.adjust({"tpm": 5})
        lease.refresh()
        self.assertEqual(lease.consumed["tpm"], 15)
        other.commit()
        # Ended elsewhere: the first handle learns it from the server's 409,
        # a LeaseEnded (a LeaseClosed) saying how.
        with self.assertRaises(tollgate.LeaseEnded) as cm:
            lease.extend(60)
        self.assertIsInstance(cm.exception, tollgate.LeaseClosed)
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "lease_closed"))
        self.assertEqual(cm.exception.ended, "committed")
        self.assertTrue(lease.closed)
        with self.assertRaises(tollgate.LeaseEnded):
            self.client.resume_lease(lease.id)

    def test_get_lease_is_a_deprecated_alias_of_resume_lease(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        lease = self.client.acquire(entity, resource, {"rpm": 2})
        with self.assertWarns(DeprecationWarning) as cm:
            other = self.client.get_lease(lease.id)
        self.assertIn("resume_lease", str(cm.warning))
        self.assertEqual(cm.filename, __file__)  # points at the caller
        self.assertIsInstance(other, tollgate.Lease)
        self.assertEqual((other.id, other.entity, other.resource, other.consumed), (lease.id, entity, resource, {"rpm": 2}))
        other.commit()
        self.assertEqual(self.available(entity, resource), {"rpm": 8})

    def test_forgotten_lease_is_lease_not_found_and_closed(self):
        # A lease the server never granted (or has forgotten): 404, an
        # error that is both a LeaseNotFound and a LeaseClosed.
        resource = self.limits_resource(["rpm:10"])
        lease = self.client.acquire(uid("key"), resource, {"rpm": 1})
        ghost = tollgate.Lease(self.client, lease.entity, lease.resource, {"lease_id": "0" * 32})
        with self.assertRaises(tollgate.LeaseNotFound) as cm:
            ghost.commit()
        self.assertIsInstance(cm.exception, tollgate.LeaseClosed)
        self.assertEqual((cm.exception.status, cm.exception.reason), (404, "lease_not_found"))
        self.assertTrue(ghost.closed)
        lease.rollback()

    def test_acquire_and_commit(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        grant = self.client.acquire_and_commit(entity, resource, {"rpm": 3})
        self.assertIsInstance(grant, tollgate.Grant)
        self.assertEqual(grant.consumed, {"rpm": 3})
        self.assertFalse(grant.degraded)
        self.assertEqual(grant.statuses[0].available, 7)
        self.assertEqual(self.available(entity, resource), {"rpm": 7})

    def test_per_call_limits_and_concurrency_slot(self):
        entity, resource = uid("key"), uid("res")
        limits = ["rpm:100", "inflight:1/concurrent"]
        lease = self.client.acquire(entity, resource, {"rpm": 1, "inflight": 1}, limits=limits)
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire(entity, resource, {"rpm": 1, "inflight": 1}, limits=limits)
        self.assertEqual([s.limit for s in cm.exception.exceeded], ["inflight"])
        lease.commit()  # the slot comes back
        self.client.acquire(entity, resource, {"rpm": 1, "inflight": 1}, limits=limits).rollback()

    def test_shared_client_across_threads(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        granted, denied, errors = [], [], []

        def one():
            try:
                self.client.acquire(entity, resource, {"rpm": 1}).commit()
                granted.append(1)
            except tollgate.RateLimitExceeded:
                denied.append(1)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=one) for _ in range(25)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertEqual((len(granted), len(denied)), (10, 15))

    def test_cascade_debits_the_parent(self):
        org, key, resource = uid("org"), uid("key"), uid("res")
        self.client.create_entity(org)
        self.client.create_entity(key, parent_id=org, cascade=True)
        self.client.set_limits(["rpm:100"], resource=resource)
        grant = self.client.acquire_and_commit(key, resource, {"rpm": 1})
        self.assertEqual(grant.consumed, {"rpm": 1})  # what was asked, once
        # Each level's debit is its own status.
        self.assertEqual({(s.entity, s.requested) for s in grant.statuses}, {(key, 1), (org, 1)})


class TimeUntilAvailableTest(ServerTest):
    def test_time_until_available(self):
        resource = self.limits_resource(["rpm:2/min"])  # a token every 30 s
        entity = uid("key")
        self.assertEqual(self.client.time_until_available(entity, resource, {"rpm": 1}), 0)
        self.client.acquire_and_commit(entity, resource, {"rpm": 2})
        wait = self.client.time_until_available(entity, resource, {"rpm": 1})
        self.assertGreater(wait, 25)
        self.assertLessEqual(wait, 30)
        with self.assertRaises(tollgate.ValidationError):
            self.client.time_until_available(entity, resource, {})


class ContextManagerTest(ServerTest):
    def test_commits_on_normal_exit(self):
        resource = self.limits_resource(["rpm:10", "tpm:1000/day"])
        entity = uid("key")
        with self.client.acquire(entity, resource, {"rpm": 1, "tpm": 100}) as lease:
            lease.adjust({"tpm": 50})
        self.assertEqual(lease.state, "committed")
        self.assertEqual(self.available(entity, resource), {"rpm": 9, "tpm": 850})

    def test_rolls_back_on_exception(self):
        resource = self.limits_resource(["rpm:10", "tpm:1000/day"])
        entity = uid("key")
        with self.assertRaisesRegex(RuntimeError, "the model failed"):
            with self.client.acquire(entity, resource, {"rpm": 1, "tpm": 100}) as lease:
                lease.adjust({"tpm": 50})
                raise RuntimeError("the model failed")
        self.assertEqual(lease.state, "rolled_back")
        self.assertEqual(self.available(entity, resource), {"rpm": 10, "tpm": 1000})

    def test_lease_ended_inside_the_block_is_left_alone(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")
        with self.client.acquire(entity, resource, {"rpm": 1}) as lease:
            lease.rollback()
        self.assertEqual(lease.state, "rolled_back")
        self.assertEqual(self.available(entity, resource), {"rpm": 10})


if __name__ == "__main__":
    unittest.main()
