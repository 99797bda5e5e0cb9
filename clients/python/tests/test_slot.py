"""slot(): a lease kept alive while the work runs, as Go's WithSlot, with
2 s leases so that the work outlasts the expiry three times over (each
extension then has a second of slack on a loaded machine)."""

from __future__ import annotations

import asyncio
import time
import unittest

import support
from support import ServerTest, uid

import tollgate

TTL = 2.0
WORK = 3 * TTL + 0.2
LOST_TTL = 1.0  # the server's least lease TTL: a loss is seen within half of it


class SyncSlotTest(ServerTest):
    def test_slot_outlives_its_expiry(self):
        resource = self.limits_resource(["jobs:2/concurrent"])
        entity = uid("key")
        control = self.client.acquire(entity, resource, {"jobs": 1}, lease_ttl=TTL)  # never extended
        slot = self.client.slot(entity, resource, {"jobs": 1}, lease_ttl=TTL)
        with slot as lease:
            first_expiry = lease.expires_at
            time.sleep(WORK)  # the work, longer than three expiries
            self.assertFalse(lease.closed)
            again = self.client.resume_lease(lease.id)  # another handle: the server still has it
            self.assertEqual(again.consumed, {"jobs": 1})
            with self.assertRaises((tollgate.LeaseNotFound, tollgate.LeaseEnded)):
                self.client.resume_lease(control.id)  # gone: expired
        self.assertEqual(lease.state, "committed")
        self.assertGreaterEqual(slot.extensions, 4)  # every half TTL
        self.assertGreater(lease.expires_at, first_expiry)

    def test_lost_slot_raises_slot_lost(self):
        resource = self.limits_resource(["jobs:1/concurrent"])
        entity = uid("key")
        with self.assertRaises(tollgate.SlotLost) as cm:
            with self.client.slot(entity, resource, {"jobs": 1}, lease_ttl=LOST_TTL) as lease:
                self.client.resume_lease(lease.id).rollback()  # ended elsewhere
                deadline = time.monotonic() + 5 * LOST_TTL
                while not lease.closed and time.monotonic() < deadline:
                    time.sleep(0.05)  # long work checking its slot between steps
                self.assertTrue(lease.closed)
        self.assertIsInstance(cm.exception, tollgate.LeaseClosed)
        self.assertIsInstance(cm.exception.__cause__, tollgate.LeaseClosed)

    def test_slot_waits_and_rolls_back_on_error(self):
        resource = self.limits_resource(["jobs:1/concurrent"])
        entity = uid("key")
        held = self.client.acquire(entity, resource, {"jobs": 1})
        with self.assertRaises(tollgate.RateLimitExceeded):
            with self.client.slot(entity, resource, {"jobs": 1}, wait=0):
                self.fail("ran without its slot")
        held.commit()
        with self.assertRaises(KeyError):
            with self.client.slot(entity, resource, {"jobs": 1}, wait=5) as lease:
                raise KeyError("boom")
        self.assertEqual(lease.state, "rolled_back")


class AsyncSlotTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        asyncio.get_running_loop().slow_callback_duration = 2  # debug mode: a loaded machine is slow
        self.sync = support.client()
        self.client = tollgate.AsyncClient(support.server().url)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_slot_outlives_its_expiry(self):
        resource = uid("res")
        self.sync.set_limits(["jobs:2/concurrent"], resource=resource)
        entity = uid("key")
        control = await self.client.acquire(entity, resource, {"jobs": 1}, lease_ttl=TTL)
        slot = self.client.slot(entity, resource, {"jobs": 1}, lease_ttl=TTL)
        async with slot as lease:
            await asyncio.sleep(WORK)
            again = await self.client.resume_lease(lease.id)
            self.assertEqual(again.consumed, {"jobs": 1})
            with self.assertRaises((tollgate.LeaseNotFound, tollgate.LeaseEnded)):
                await self.client.resume_lease(control.id)
        self.assertEqual(lease.state, "committed")
        self.assertGreaterEqual(slot.extensions, 4)  # every half TTL

    async def test_lost_slot_cancels_the_work(self):
        resource = uid("res")
        self.sync.set_limits(["jobs:1/concurrent"], resource=resource)
        entity = uid("key")
        reached = []
        start = time.monotonic()
        with self.assertRaises(tollgate.SlotLost) as cm:
            async with self.client.slot(entity, resource, {"jobs": 1}, lease_ttl=LOST_TTL) as lease:
                await (await self.client.resume_lease(lease.id)).rollback()  # ended elsewhere
                await asyncio.sleep(30)  # cancelled at the next extension
                reached.append(True)
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(reached, [])
        self.assertIsInstance(cm.exception.__cause__, tollgate.LeaseClosed)
        self.assertTrue(lease.closed)
        # The task goes on after the SlotLost: it was not left cancelled.
        await asyncio.sleep(0)
        self.assertEqual(await self.client.health(), "ok")

    async def test_cancelled_slot_rolls_back(self):
        resource = uid("res")
        self.sync.set_limits(["jobs:1/concurrent"], resource=resource)
        entity = uid("key")
        holding = asyncio.Event()

        async def work():
            async with self.client.slot(entity, resource, {"jobs": 1}, lease_ttl=LOST_TTL):
                holding.set()
                await asyncio.sleep(30)

        task = asyncio.ensure_future(work())
        await holding.wait()
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        avail = {s.limit: s.available for s in await self.client.available(entity, resource) if s.entity == entity}
        self.assertEqual(avail, {"jobs": 1})


if __name__ == "__main__":
    unittest.main()
