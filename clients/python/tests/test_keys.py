"""Stored API keys (create_key, list_keys, revoke_key), what a key may send
(allow_limits, entity scope) and reset, against a server of their own: a
server without --keys starts authenticating as soon as its store holds a
key, so the shared server must never hold one."""

from __future__ import annotations

import os
import unittest
from datetime import timedelta

import support
from support import uid

import tollgate

ADMIN, GLOBAL_ADMIN, FILE_ACQUIRE, FILE_OWN_LIMITS = (support.new_key() for _ in range(4))
_server = None
_keys_path = ""


def setUpModule():
    global _server, _keys_path
    _keys_path = support.keys_file([
        [ADMIN, "default", "admin", "ops"],
        [GLOBAL_ADMIN, "*", "admin", "root-ops"],
        [FILE_ACQUIRE, "default", "acquire", "file-checkout"],
        [FILE_OWN_LIMITS, "default", "acquire", "file-gateway", "allow_limits"],
    ])
    _server = support.Server("--keys", _keys_path).start()


def tearDownModule():
    if _server is not None:
        _server.stop()
    if _keys_path:
        os.unlink(_keys_path)


def client(key=None, **kw):
    return tollgate.Client(_server.url, api_key=key, **kw)


def limited_resource(limits):
    resource = uid("res")
    client(ADMIN).set_limits(limits, resource=resource)
    return resource


class KeysTest(unittest.TestCase):
    def setUp(self):
        self.admin = client(ADMIN)

    def test_create_use_list_revoke(self):
        name = uid("checkout")
        created = self.admin.create_key(name, "acquire")
        self.assertIsInstance(created, tollgate.CreatedKey)
        self.assertIsInstance(created, tollgate.KeyInfo)
        self.assertRegex(created.key, r"^tg_[A-Za-z0-9_-]{43}$")
        self.assertEqual((created.name, created.namespace, created.role, created.entity, created.allow_limits),
                         (name, "default", "acquire", "", False))
        self.assertIsNotNone(created.created_at)
        self.assertIsNone(created.expires_at)
        self.assertNotIn(created.key, repr(created))  # the secret stays out of logs

        # The new key works at once.
        resource = limited_resource(["rpm:10"])
        grant = client(created.key).acquire_and_commit("k", resource, {"rpm": 1})
        self.assertEqual(grant.consumed, {"rpm": 1})

        # Listed, without its secret; keys-file keys are not.
        listed = {k.name: k for k in self.admin.iter_keys(page_size=2)}
        self.assertEqual(listed[name], created.info)
        self.assertIsInstance(listed[name], tollgate.KeyInfo)
        self.assertNotIsInstance(listed[name], tollgate.CreatedKey)
        self.assertNotIn("file-checkout", listed)

        with self.assertRaises(tollgate.KeyExists) as cm:
            self.admin.create_key(name, "read")
        self.assertIsInstance(cm.exception, tollgate.Conflict)
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "key_exists"))

        self.admin.revoke_key(name)
        with self.assertRaises(tollgate.Unauthorized) as cm:
            client(created.key).acquire_and_commit("k", resource, {"rpm": 1})
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthenticated"))
        self.assertNotIn(name, {k.name for k in self.admin.iter_keys()})

        with self.assertRaises(tollgate.KeyNotFound) as cm:
            self.admin.revoke_key(name)
        self.assertIsInstance(cm.exception, tollgate.NotFound)
        self.assertEqual((cm.exception.status, cm.exception.reason), (404, "key_not_found"))

    def test_a_key_is_the_principal_whatever_the_call_says(self):
        # With API keys the server records the key's name; a per-call
        # principal is sent but does not replace it.
        name = uid("audited")
        self.admin.create_key(name, "read", principal="someone-else")
        self.admin.revoke_key(name, principal="someone-else")
        events, after = [], None
        while True:
            page, after = self.admin.audit_events(after=after or "")
            events += [e for e in page if e.details.get("name") == name]
            if not after:
                break
        self.assertEqual([(e.action, e.principal) for e in events], [("key.create", "ops"), ("key.revoke", "ops")])

    def test_list_pages(self):
        prefix = uid("page") + "-"
        names = [prefix + c for c in "abc"]
        for n in names:
            self.admin.create_key(n, "read")
        page, nxt = self.admin.list_keys(after=prefix, limit=2)
        self.assertEqual([k.name for k in page], names[:2])
        self.assertEqual(nxt, names[1])
        page, _ = self.admin.list_keys(after=nxt, limit=2)
        self.assertEqual(page[0].name, names[2])
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.admin.list_keys(limit=5000)
        self.assertEqual(cm.exception.field, "limit")

    def test_expiry_roles_and_namespaces(self):
        created = self.admin.create_key(uid("short"), "read", expires_in=0.2)  # rounded up to 1 s
        self.assertEqual(created.expires_at - created.created_at, timedelta(seconds=1))
        created = self.admin.create_key(uid("quarter"), "read", expires_in=timedelta(days=90))
        self.assertEqual(created.expires_at - created.created_at, timedelta(days=90))

        # A read key reads and does not acquire; an acquire key does not manage keys.
        resource = limited_resource(["rpm:10"])
        reader = client(created.key)
        self.assertEqual(reader.get_limits(resource=resource).limits, ["rpm:10/min"])
        with self.assertRaises(tollgate.Forbidden) as cm:
            reader.acquire("k", resource, {"rpm": 1})
        self.assertEqual(cm.exception.field, "")  # a role refusal names no field
        with self.assertRaises(tollgate.Forbidden):
            client(FILE_ACQUIRE).create_key(uid("nope"), "admin")
        with self.assertRaises(tollgate.Forbidden):
            client(FILE_ACQUIRE).list_keys()

        # A key belongs to the namespace it was created in.
        ns = uid("team")
        root = client(GLOBAL_ADMIN)
        root.register_namespace(ns)
        team_admin = client(GLOBAL_ADMIN, namespace=ns).create_key(uid("team-admin"), "admin")
        self.assertEqual(team_admin.namespace, ns)
        team = client(team_admin.key)  # works in its namespace without naming it
        team.set_limits(["rpm:1"], resource="chat")
        team.acquire_and_commit("k", "chat", {"rpm": 1})
        self.assertIn(team_admin.name, {k.name for k in team.iter_keys()})
        self.assertNotIn(team_admin.name, {k.name for k in self.admin.iter_keys()})
        with self.assertRaises(tollgate.Forbidden):
            client(team_admin.key, namespace="default").list_keys()


class WhatAKeyMaySendTest(unittest.TestCase):
    def setUp(self):
        self.admin = client(ADMIN)

    def test_own_limits_need_allow_limits(self):
        resource = limited_resource(["rpm:10"])
        plain = client(self.admin.create_key(uid("plain"), "acquire").key)
        plain.acquire_and_commit("k", resource, {"rpm": 1})  # the stored limits: fine
        with self.assertRaises(tollgate.Forbidden) as cm:
            plain.acquire("k", resource, {"rpm": 1}, limits=["rpm:1000000"])
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field), (403, "permission_denied", "limits"))
        self.assertIn("allow_limits", e.reason)
        with self.assertRaises(tollgate.Forbidden) as cm:
            plain.acquire_and_commit("k", resource, {"rpm": 1}, on_unavailable=tollgate.ALLOW)
        self.assertEqual(cm.exception.field, "on_unavailable")
        with self.assertRaises(tollgate.Forbidden) as cm:
            client(FILE_ACQUIRE).acquire("k", resource, {"rpm": 1}, limits=["rpm:1000000"])
        self.assertEqual(cm.exception.field, "limits")
        # Nothing was debited by the refusals.
        self.assertEqual(self.admin.available("k", resource)[0].available, 9)

        created = self.admin.create_key(uid("own"), "acquire", allow_limits=True)
        self.assertTrue(created.allow_limits)
        own = client(created.key)
        grant = own.acquire_and_commit("k", uid("res"), {"rpm": 1}, limits=["rpm:5"], on_unavailable=tollgate.ALLOW)
        self.assertEqual(grant.statuses[0].capacity, 5)
        # The keys file's allow_limits option grants the same.
        grant = client(FILE_OWN_LIMITS).acquire_and_commit("k", uid("res"), {"rpm": 1}, limits=["rpm:7"])
        self.assertEqual(grant.statuses[0].capacity, 7)

    def test_entity_scope(self):
        org, team, other = uid("org"), uid("team"), uid("org")
        self.admin.create_entity(org)
        self.admin.create_entity(team, parent_id=org)
        created = self.admin.create_key(uid("org-gateway"), "acquire", entity=org)
        self.assertEqual(created.entity, org)
        scoped = client(created.key)
        resource = limited_resource(["rpm:10"])
        scoped.acquire_and_commit(org, resource, {"rpm": 1})
        scoped.acquire_and_commit(team, resource, {"rpm": 1})  # a descendant
        with self.assertRaises(tollgate.Forbidden) as cm:
            scoped.acquire_and_commit(other, resource, {"rpm": 1})
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field), (403, "permission_denied", "entity"))
        self.assertIn(other, e.reason)
        with self.assertRaises(tollgate.Forbidden) as cm:
            scoped.available(other, resource)
        self.assertEqual(cm.exception.field, "entity")

        # A scoped admin key resets its entities only.
        scoped_admin = client(self.admin.create_key(uid("org-admin"), "admin", entity=org).key)
        scoped_admin.reset(team, resource)
        with self.assertRaises(tollgate.Forbidden) as cm:
            scoped_admin.reset(other, resource)
        self.assertEqual(cm.exception.field, "entity")
        with self.assertRaises(tollgate.Forbidden):  # an acquire key does not reset
            scoped.reset(org, resource)

    def test_reset_lifts_a_penalty(self):
        resource = limited_resource(["rpm:100", "tpm:10000"])
        entity = uid("key")
        self.admin.penalize(entity, resource, ["rpm", "tpm"], retry_after=60, reason="vendor 429")
        with self.assertRaises(tollgate.RateLimitExceeded):
            client(FILE_ACQUIRE).acquire_and_commit(entity, resource, {"rpm": 1})
        self.admin.reset(entity, resource, limits=["rpm", "tpm"], reason="vendor back")
        client(FILE_ACQUIRE).acquire_and_commit(entity, resource, {"rpm": 1, "tpm": 10})
        events, _ = self.admin.audit_events(entity)
        reset = [e for e in events if e.action == "limit.reset"]
        self.assertEqual(len(reset), 1)
        self.assertEqual(reset[0].principal, "ops")
        self.assertEqual(reset[0].details.get("reason"), "vendor back")


if __name__ == "__main__":
    unittest.main()
