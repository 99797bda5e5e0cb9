"""Reservations: reserve (idempotent), conflict, get, list, release."""

from __future__ import annotations

import unittest
from datetime import datetime, timedelta, timezone

from support import ServerTest, uid

import tollgate


class ReservationsTest(ServerTest):
    def setUp(self):
        self.resource = self.limits_resource(["clusters:2/reserved", "launches:10"])
        self.entity = uid("team")

    def test_reserve_twice_is_the_same_reservation(self):
        rid = uid("j")
        first = self.client.reserve(self.entity, self.resource, rid, {"clusters": 1, "launches": 1})
        self.assertIsInstance(first, tollgate.Reserved)
        self.assertIsInstance(first, tollgate.Reservation)
        self.assertTrue(first.new)
        self.assertEqual((first.id, first.entity, first.resource), (rid, self.entity, self.resource))
        self.assertEqual(first.consumed, {"clusters": 1, "launches": 1})
        self.assertEqual({s.limit: s.kind for s in first.statuses}, {"clusters": "reserved", "launches": "rate"})
        self.assertIsNone(first.expires_at)
        again = self.client.reserve(self.entity, self.resource, rid)
        self.assertFalse(again.new)
        self.assertEqual(again.statuses, [])
        self.assertEqual(again.created_at, first.created_at)
        self.assertEqual(self.available(self.entity, self.resource), {"clusters": 1, "launches": 9})

    def test_conflict_full_release_and_not_found(self):
        rid = uid("j")
        self.client.reserve(self.entity, self.resource, rid)
        with self.assertRaises(tollgate.ReservationConflict) as cm:
            self.client.reserve(uid("other-team"), self.resource, rid)
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "reservation_conflict"))
        self.assertIsInstance(cm.exception, tollgate.Conflict)

        self.client.reserve(self.entity, self.resource, uid("j"))
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.reserve(self.entity, self.resource, uid("j"))
        self.assertEqual([s.limit for s in cm.exception.exceeded], ["clusters"])

        got = self.client.get_reservation(rid)
        self.assertEqual((got.entity, got.resource), (self.entity, self.resource))
        self.client.release(rid)
        with self.assertRaises(tollgate.ReservationNotFound) as cm:
            self.client.release(rid)
        self.assertIsInstance(cm.exception, tollgate.LeaseNotFound)  # the wire's reason
        with self.assertRaises(tollgate.ReservationNotFound):
            self.client.get_reservation(rid)
        self.client.reserve(self.entity, self.resource, uid("j"))  # the slot came back

    def test_ids_with_slash_and_colon(self):
        rid = "arn:aws:emr:eu-west-1:123:cluster/" + uid("j")
        self.client.reserve(self.entity, self.resource, rid)
        self.assertEqual(self.client.get_reservation(rid).id, rid)
        self.client.release(rid)

    def test_list_pages_and_ttl(self):
        ids = sorted(uid("j") for _ in range(2))
        for rid in ids:
            self.client.reserve(self.entity, self.resource, rid, ttl=timedelta(hours=1))
        page, nxt = self.client.list_reservations(self.entity, self.resource, limit=1)
        self.assertEqual([r.id for r in page], ids[:1])
        self.assertEqual(nxt, ids[0])
        self.assertGreater(page[0].expires_at, datetime.now(timezone.utc) + timedelta(minutes=59))
        self.assertEqual([r.id for r in self.client.iter_reservations(self.entity, page_size=1)], ids)

    def test_list_leases_not_reservations(self):
        self.client.reserve(self.entity, self.resource, uid("j"))
        leases = [self.client.acquire(self.entity, self.resource, {"launches": 2}) for _ in range(3)]
        ids = sorted(le.id for le in leases)
        page, nxt = self.client.list_leases(self.entity, self.resource, limit=2)
        self.assertEqual([le.lease_id for le in page], ids[:2])
        self.assertEqual(nxt, ids[1])
        rest, nxt = self.client.list_leases(self.entity, self.resource, after=nxt, limit=2)
        self.assertEqual(([le.lease_id for le in rest], nxt), (ids[2:], None))
        first = page[0]
        self.assertIsInstance(first, tollgate.LeaseInfo)
        self.assertEqual((first.entity, first.resource, first.consumed), (self.entity, self.resource, {"launches": 2}))
        self.assertGreater(first.expires_at, datetime.now(timezone.utc))
        with self.assertRaises(tollgate.ValidationError):
            self.client.list_leases(resource=self.resource)
        for le in leases:
            le.commit()
        self.assertEqual(self.client.list_leases(self.entity)[0], [])


if __name__ == "__main__":
    unittest.main()
