"""Calendar quotas (NAME:N/UNIT@ZONE) against a real server: stored in
their text form, every status of a quota carries resets_at_ms (grants,
leases, available, 429 bodies), and a refusal waits exactly to the
boundary. The server runs on the wall clock, so the test computes the
boundary itself and allows for the few seconds a call may take."""

from __future__ import annotations

import time
import unittest
from datetime import datetime, timedelta, timezone

from support import ServerTest, uid

import tollgate

try:
    from zoneinfo import ZoneInfo
except ImportError:  # pragma: no cover - Python 3.8 has none; 3.9+ is required
    ZoneInfo = None  # type: ignore[assignment,misc]

#: How far the server's clock and ours may be apart around one call (ms).
SLACK_MS = 5000


def next_month_utc(now: datetime) -> datetime:
    """The start of the month after now's, in UTC."""
    if now.month == 12:
        return datetime(now.year + 1, 1, 1, tzinfo=timezone.utc)
    return datetime(now.year, now.month + 1, 1, tzinfo=timezone.utc)


def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


class CalendarQuotaTest(ServerTest):
    def boundary_ms(self, call):
        """Runs call and returns (its result, the next month's start in
        Unix ms), checking that no month ended during the call (the
        boundary taken before and after agree), so the test holds even
        at midnight on the last day of a month."""
        for _ in range(2):
            before = next_month_utc(datetime.now(timezone.utc))
            out = call()
            after = next_month_utc(datetime.now(timezone.utc))
            if before == after:
                return out, ms(before)
        self.fail("a month ended twice during one call")

    def test_monthly_quota_resets_at_next_month(self):
        resource = self.limits_resource(["tok:1000/month@UTC", "rpm:100"])
        self.assertIn("tok:1000/month@UTC", self.client.get_limits(resource=resource).limits)
        entity = uid("key")

        grant, nxt = self.boundary_ms(lambda: self.client.acquire_and_commit(entity, resource, {"tok": 900, "rpm": 1}))
        by = {s.limit: s for s in grant.statuses}
        tok, rpm = by["tok"], by["rpm"]
        self.assertEqual((tok.available, tok.capacity, tok.exceeded), (100, 1000, False))
        self.assertEqual(tok.resets_at_ms, nxt)
        self.assertEqual(tok.resets_at, datetime.fromtimestamp(nxt / 1000, tz=timezone.utc))
        self.assertEqual(tok.resets_at.tzinfo, timezone.utc)
        # Not a quota: no reset time.
        self.assertEqual((rpm.resets_at_ms, rpm.resets_at), (0, None))
        # The window each is granted over: a month of 28 to 31 days, a minute.
        self.assertIn(tok.window_ms, [d * 86_400_000 for d in (28, 29, 30, 31)])
        self.assertEqual(rpm.window_ms, 60_000)

        sts, nxt = self.boundary_ms(lambda: self.client.available(entity, resource))
        tok = next(s for s in sts if s.limit == "tok")
        self.assertEqual((tok.available, tok.resets_at_ms), (100, nxt))

        # 200 more cannot be covered before the month ends: the refusal
        # waits exactly to the boundary, on the server's wall clock.
        def refuse():
            with self.assertRaises(tollgate.RateLimitExceeded) as cm:
                self.client.acquire(entity, resource, {"tok": 200})
            return cm.exception, int(time.time() * 1000)

        (e, now_ms), nxt = self.boundary_ms(refuse)
        self.assertGreater(e.retry_after_ms, 0)
        self.assertLessEqual(abs(e.retry_after_ms - (nxt - now_ms)), SLACK_MS,
                             f"retry_after_ms {e.retry_after_ms}, to the month's end {nxt - now_ms}")
        self.assertEqual([s.limit for s in e.exceeded], ["tok"])
        self.assertEqual(e.exceeded[0].resets_at_ms, nxt)
        self.assertEqual(e.exceeded[0].retry_after_ms, e.retry_after_ms)
        # The same wait from available(consume=...), writing nothing.
        wait = self.client.time_until_available(entity, resource, {"tok": 200})
        self.assertLessEqual(abs(wait * 1000 - (nxt - int(time.time() * 1000))), SLACK_MS)

    def test_per_call_quota_in_a_lease(self):
        entity, resource = uid("key"), uid("llm")
        limits = ["tok:1000/month@UTC"]
        lease, nxt = self.boundary_ms(lambda: self.client.acquire(entity, resource, {"tok": 1}, limits=limits))
        with lease:
            st = lease.statuses[0]
            self.assertEqual((st.limit, st.source, st.available, st.resets_at_ms), ("tok", "call", 999, nxt))

    @unittest.skipIf(ZoneInfo is None, "no zoneinfo")
    def test_daily_quota_in_a_zone(self):
        berlin = ZoneInfo("Europe/Berlin")

        def next_midnight() -> int:
            day = datetime.now(berlin).date() + timedelta(days=1)
            return ms(datetime(day.year, day.month, day.day, tzinfo=berlin))

        entity, resource = uid("key"), uid("llm")
        before = next_midnight()
        sts = self.client.available(entity, resource, limits=["d:3/day@Europe/Berlin"])
        self.assertIn(sts[0].resets_at_ms, {before, next_midnight()})
        self.assertEqual(sts[0].available, 3)

    def test_unknown_zone_names_it(self):
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.set_limits(["tok:1000/month@Mars/Base"], resource=uid("llm"))
        self.assertIn("Mars/Base", cm.exception.reason)
        self.assertTrue(cm.exception.field.startswith("limit"), cm.exception.field)


if __name__ == "__main__":
    unittest.main()
