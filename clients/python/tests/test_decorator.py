"""@client.rate_limit: each call of the function runs holding a lease."""

from __future__ import annotations

import asyncio
import time
import unittest

from support import ServerTest, uid

import tollgate


class DecoratorTest(ServerTest):
    def test_entity_from_a_callable_and_denial(self):
        resource = self.limits_resource(["rpm:2"])
        calls = []

        @self.client.rate_limit(entity=lambda user, prompt: user, resource=resource, consume={"rpm": 1})
        def complete(user, prompt):
            """Completes a prompt."""
            calls.append((user, prompt))
            return prompt.upper()

        self.assertEqual(complete.__name__, "complete")
        self.assertEqual(complete.__doc__, "Completes a prompt.")
        alice, bob = uid("alice"), uid("bob")
        self.assertEqual(complete(alice, "hi"), "HI")
        self.assertEqual(complete(alice, prompt="there"), "THERE")
        with self.assertRaises(tollgate.RateLimitExceeded):
            complete(alice, "no")
        self.assertEqual(complete(bob, "yes"), "YES")  # another entity
        self.assertEqual(calls, [(alice, "hi"), (alice, "there"), (bob, "yes")])  # a denied call does not run
        self.assertEqual(self.available(alice, resource), {"rpm": 0})  # committed

    def test_arg_by_name_position_or_default(self):
        resource = self.limits_resource(["rpm:10"])
        account = uid("acct")

        @self.client.rate_limit(entity=tollgate.arg("account_id"), resource=resource,
                                consume=lambda n, account_id=account: {"rpm": n})
        def invoke(n, account_id=account):
            return n

        other = uid("acct")
        invoke(1)  # the default
        invoke(2, other)  # by position
        invoke(3, account_id=account)  # by keyword
        self.assertEqual(self.available(account, resource), {"rpm": 6})
        self.assertEqual(self.available(other, resource), {"rpm": 8})
        with self.assertRaises(tollgate.ValidationError):
            self.client.rate_limit(entity=tollgate.arg("nope"), resource=resource, consume={"rpm": 1})(invoke)

    def test_exception_rolls_back(self):
        resource = self.limits_resource(["rpm:10"])
        entity = uid("key")

        @self.client.rate_limit(entity=entity, resource=resource, consume={"rpm": 3})
        def fails():
            raise KeyError("boom")

        with self.assertRaises(KeyError):
            fails()
        self.assertEqual(self.available(entity, resource), {"rpm": 10})

    def test_wait(self):
        entity, resource = uid("key"), uid("res")

        @self.client.rate_limit(entity=entity, resource=resource, consume={"rps": 1},
                                limits=["rps:1/sec"], wait=5)
        def tick():
            return time.monotonic()

        first, second = tick(), tick()
        self.assertGreater(second - first, 0.3)  # the second waited for the refill

    def test_coroutine_function(self):
        resource = self.limits_resource(["rpm:1"])
        entity = uid("key")

        @self.client.rate_limit(entity=entity, resource=resource, consume={"rpm": 1})
        async def fetch(x):
            await asyncio.sleep(0)
            return x * 2

        self.assertEqual(asyncio.run(fetch(21)), 42)
        with self.assertRaises(tollgate.RateLimitExceeded):
            asyncio.run(fetch(1))
        self.assertEqual(self.available(entity, resource), {"rpm": 0})

        other = uid("key")

        @self.client.rate_limit(entity=other, resource=resource, consume={"rpm": 1})
        async def broken():
            raise ValueError("no")

        with self.assertRaises(ValueError):
            asyncio.run(broken())
        self.assertEqual(self.available(other, resource), {"rpm": 1})  # rolled back


if __name__ == "__main__":
    unittest.main()
