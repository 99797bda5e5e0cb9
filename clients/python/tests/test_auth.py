"""API keys: a second server with --keys; Unauthorized and Forbidden."""

from __future__ import annotations

import os
import unittest

import support
from support import uid

import tollgate

ADMIN, ACQUIRE, READ, TEAM = (support.new_key() for _ in range(4))
_server = None
_keys_path = ""


def setUpModule():
    global _server, _keys_path
    _keys_path = support.keys_file([
        [ADMIN, "*", "admin", "ops"],
        [ACQUIRE, "default", "acquire", "checkout"],
        [READ, "default", "read", "dashboard"],
        [TEAM, "team-a", "admin", "team-a-admin"],
    ])
    _server = support.Server("--keys", _keys_path).start()


def tearDownModule():
    if _server is not None:
        _server.stop()
    if _keys_path:
        os.unlink(_keys_path)


def client(key=None, **kw):
    return tollgate.Client(_server.url, api_key=key, **kw)


class AuthTest(unittest.TestCase):
    def test_roles(self):
        admin = client(ADMIN)
        resource = uid("res")
        admin.set_limits(["rpm:10"], resource=resource)

        with self.assertRaises(tollgate.Unauthorized) as cm:
            client().acquire("k", resource, {"rpm": 1})
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthenticated"))
        with self.assertRaises(tollgate.Unauthorized):
            client("tg_not-a-key").acquire("k", resource, {"rpm": 1})
        self.assertEqual(client().health(), "ok")  # needs no key

        checkout = client(ACQUIRE)
        checkout.acquire("k", resource, {"rpm": 1}).commit()
        with self.assertRaises(tollgate.Forbidden) as cm:
            checkout.set_limits(["rpm:1000"], resource=resource)
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "permission_denied"))

        dashboard = client(READ)
        self.assertEqual(dashboard.get_limits(resource=resource).limits, ["rpm:10/min"])
        with self.assertRaises(tollgate.Forbidden):
            dashboard.acquire("k", resource, {"rpm": 1})

    def test_namespace_keys(self):
        admin = client(ADMIN)
        try:
            admin.register_namespace("team-a")
        except tollgate.NamespaceExists:
            pass
        team = client(TEAM)  # bound to team-a: its calls work there
        resource = uid("res")
        team.set_limits(["rpm:2"], resource=resource)
        team.acquire_and_commit("k", resource, {"rpm": 2})
        self.assertEqual(client(ADMIN, namespace="team-a").available("k", resource)[0].available, 0)
        with self.assertRaises(tollgate.Forbidden):
            client(TEAM, namespace="default").available("k", resource)
        with self.assertRaises(tollgate.Forbidden):
            team.list_namespaces()  # the registry needs an admin key for "*"
        with self.assertRaises(tollgate.Forbidden):
            client(ACQUIRE, namespace="team-a").acquire("k", resource, {"rpm": 1})


if __name__ == "__main__":
    unittest.main()
