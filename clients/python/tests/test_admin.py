"""Entities, limits at every level (resources with '/'), audit, usage,
capacity and the namespace registry."""

from __future__ import annotations

import dataclasses
import unittest
from datetime import datetime, timedelta, timezone

import support
from support import ServerTest, uid

import tollgate


class EntitiesTest(ServerTest):
    def test_create_get_children_delete(self):
        org, key = uid("org"), uid("key")
        created = self.client.create_entity(org, name="Acme", metadata={"tier": "gold"})
        self.assertEqual((created.id, created.name, created.metadata), (org, "Acme", {"tier": "gold"}))
        self.assertIsNotNone(created.created_at)
        self.client.create_entity(key, parent_id=org, cascade=True)
        self.assertEqual(self.client.get_entity(org), created)
        kids = self.client.children(org)
        self.assertEqual([(k.id, k.parent_id, k.cascade) for k in kids], [(key, org, True)])
        with self.assertRaises(tollgate.EntityExists):
            self.client.create_entity(org)
        with self.assertRaises(tollgate.EntityNotFound):
            self.client.create_entity(uid("key"), parent_id=uid("ghost"))
        self.client.delete_entity(key)
        with self.assertRaises(tollgate.EntityNotFound):
            self.client.get_entity(key)
        with self.assertRaises(tollgate.EntityNotFound):
            self.client.delete_entity(key)

    def test_list_entities_pages(self):
        # A namespace of its own, so that the listing holds only these.
        name = uid("ents")
        self.client.register_namespace(name)
        c = support.client(namespace=name)
        ids = sorted(uid("e") for _ in range(3))
        for i in ids:
            c.create_entity(i, name="n-" + i)

        page, nxt = c.list_entities(limit=2)
        self.assertEqual([e.id for e in page], ids[:2])
        self.assertEqual(page[0].name, "n-" + ids[0])
        self.assertEqual(nxt, ids[1])
        page, nxt = c.list_entities(after=nxt, limit=2)
        self.assertEqual([e.id for e in page], ids[2:])
        self.assertIsNone(nxt)  # not a full page: the last
        self.assertEqual([e.id for e in c.iter_entities(page_size=2)], ids)
        self.assertEqual(c.list_entities(after=ids[2]), ([], None))
        with self.assertRaises(tollgate.ValidationError) as cm:
            c.list_entities(limit=1001)
        self.assertEqual(cm.exception.field, "limit")

    def test_update_entity(self):
        org, org2, key = uid("org"), uid("org"), uid("key")
        self.client.create_entity(org)
        self.client.create_entity(org2)
        created = self.client.create_entity(key, name="old", metadata={"team": "a"})

        renamed = self.client.update_entity(key, name="new")
        self.assertEqual((renamed.name, renamed.parent_id, renamed.cascade, renamed.metadata),
                         ("new", "", False, {"team": "a"}))  # the rest is kept
        self.assertEqual(renamed.created_at, created.created_at)

        moved = self.client.update_entity(key, parent_id=org, cascade=True)
        self.assertEqual((moved.name, moved.parent_id, moved.cascade), ("new", org, True))
        self.assertEqual(self.client.get_entity(key), moved)
        self.assertEqual([e.id for e in self.client.children(org)], [key])

        # A new parent keeps the cascade; an empty parent_id stops it.
        self.assertEqual(self.client.update_entity(key, parent_id=org2).cascade, True)
        root = self.client.update_entity(key, parent_id="", metadata={})
        self.assertEqual((root.parent_id, root.cascade, root.metadata), ("", False, {}))
        self.assertEqual(self.client.get_entity(key), root)
        # An empty patch changes no field, and is a new version (a write,
        # with its audit event, as every update).
        self.assertEqual(self.client.update_entity(key), dataclasses.replace(root, version=root.version + 1))

        with self.assertRaises(tollgate.EntityNotFound):
            self.client.update_entity(uid("ghost"), name="x")
        with self.assertRaises(tollgate.EntityNotFound):
            self.client.update_entity(key, parent_id=uid("ghost"))
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.update_entity(key, cascade=True)  # cascade without a parent
        self.assertEqual(cm.exception.field, "cascade")
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.update_entity(key, cascade="yes")  # checked before any call
        self.assertEqual(cm.exception.field, "cascade")
        self.assertIsNone(cm.exception.status)

    def test_update_entity_refuses_a_cycle(self):
        a, b, c = uid("a"), uid("b"), uid("c")
        self.client.create_entity(a)
        self.client.create_entity(b, parent_id=a)
        self.client.create_entity(c, parent_id=b, cascade=True)
        for parent in (c, b, a):  # a grandchild, a child, the entity itself
            with self.assertRaises(tollgate.ValidationError) as cm:
                self.client.update_entity(a, parent_id=parent)
            self.assertEqual((cm.exception.status, cm.exception.field), (400, "parent_id"))
        self.assertEqual(self.client.get_entity(a).parent_id, "")  # nothing written


class LimitsTest(ServerTest):
    def test_levels_and_resources_with_slash(self):
        resource = "openai/" + uid("gpt")  # '/' must be escaped in the path
        stored = self.client.set_limits(["rpm:3", "tpm:10000/min:15000"], resource=resource)
        self.assertEqual(stored, tollgate.LimitsConfig(["rpm:3/min", "tpm:10000/min:15000"], version=1))
        self.assertEqual(self.client.get_limits(resource=resource).limits, ["rpm:3/min", "tpm:10000/min:15000"])

        org = uid("org")
        self.client.create_entity(org)
        self.client.set_limits(["rpm:100"], entity=org)
        self.client.set_limits(["rpm:7"], entity=org, resource=resource)
        self.assertEqual(self.client.get_limits(entity=org).limits, ["rpm:100/min"])
        self.assertEqual(self.client.get_limits(entity=org, resource=resource).limits, ["rpm:7/min"])
        # The most specific level wins.
        caps = {s.limit: s.capacity for s in self.client.available(org, resource)}
        self.assertEqual(caps, {"rpm": 7})
        self.client.delete_limits(entity=org, resource=resource)
        with self.assertRaises(tollgate.NotFound):
            self.client.get_limits(entity=org, resource=resource)
        self.assertEqual({s.limit: s.capacity for s in self.client.available(org, resource)}, {"rpm": 100})
        self.client.delete_limits(resource=resource)
        with self.assertRaises(tollgate.NotFound):
            self.client.delete_limits(resource=resource)
        with self.assertRaises(tollgate.EntityNotFound):
            self.client.set_limits(["rpm:1"], entity=uid("ghost"))
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.set_limits(["rpm:1"], resource=resource, on_unavailable="allow")
        self.assertEqual(cm.exception.field, "on_unavailable")

    def test_shadow_limits(self):
        # tpm in shadow: a request it cannot cover is granted, its status
        # exceeded and in shadow; one rpm refuses names rpm alone.
        resource = uid("shadow")
        stored = self.client.set_limits(["rpm:2", "tpm:100"], resource=resource, shadow=["tpm"])
        self.assertEqual(stored.shadow, ["tpm"])
        self.assertEqual(self.client.get_limits(resource=resource).shadow, ["tpm"])
        key = uid("key")
        lease = self.client.acquire(key, resource, {"rpm": 1, "tpm": 150})
        tpm = next(s for s in lease.statuses if s.limit == "tpm")
        self.assertEqual((tpm.exceeded, tpm.shadow, tpm.denies, tpm.available, tpm.source), (True, True, False, -50, "resource"))
        lease.commit()
        self.client.acquire(key, resource, {"rpm": 1}).commit()
        with self.assertRaises(tollgate.RateLimitExceeded) as cm:
            self.client.acquire(key, resource, {"rpm": 1, "tpm": 1})
        self.assertEqual([s.limit for s in cm.exception.exceeded], ["rpm"])
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.set_limits(["rpm:1"], resource=resource, shadow=["tpm"])
        self.assertEqual(cm.exception.field, "shadow")

    def test_alert_at(self):
        # Alert thresholds are stored and read back, at one level and in
        # the listing; bad ones are refused naming alert_at.
        resource = uid("alerts")
        stored = self.client.set_limits(["rpm:100"], resource=resource, alert_at=[0.8, 1])
        self.assertEqual(stored.alert_at, [0.8, 1.0])
        self.assertEqual(self.client.get_limits(resource=resource).alert_at, [0.8, 1.0])
        self.assertEqual(self.client.set_limits(["rpm:100"], resource=resource).alert_at, [])
        for bad in ([0.9, 0.8], [1.5], [0]):
            with self.assertRaises(tollgate.ValidationError) as cm:
                self.client.set_limits(["rpm:1"], resource=resource, alert_at=bad)
            self.assertEqual(cm.exception.field, "alert_at")
        with self.assertRaises(tollgate.ValidationError):
            self.client.set_limits(["rpm:1"], resource=resource, alert_at=0.8)

    def test_list_limits_every_level_paged(self):
        name = uid("lims")
        self.client.register_namespace(name)
        c = support.client(namespace=name)
        org, resource = uid("org"), "openai/" + uid("gpt")
        c.create_entity(org)
        c.set_limits(["rpm:100"], on_unavailable="allow")
        c.set_limits(["rpm:3", "tpm:10000/min:15000"], resource=resource)
        c.set_limits(["tpm:200000/hour"], entity=org)
        c.set_limits(["rpm:7"], entity=org, resource=resource)
        want = [
            tollgate.ScopedLimits(limits=["rpm:100/min"], on_unavailable="allow", version=1),
            tollgate.ScopedLimits(resource=resource, limits=["rpm:3/min", "tpm:10000/min:15000"], version=1),
            tollgate.ScopedLimits(entity=org, resource="_default_", limits=["tpm:200000/hour"], version=1),
            tollgate.ScopedLimits(entity=org, resource=resource, limits=["rpm:7/min"], version=1),
        ]

        page, nxt = c.list_limits(limit=2)
        self.assertEqual(page, want[:2])
        self.assertIsNotNone(nxt)
        self.assertEqual(page[0].config, tollgate.LimitsConfig(["rpm:100/min"], "allow", version=1))
        page2, nxt = c.list_limits(after=nxt, limit=2)
        self.assertEqual(page2, want[2:])
        self.assertIsNotNone(nxt)  # a full page: the next one is empty
        self.assertEqual(c.list_limits(after=nxt, limit=2), ([], None))
        self.assertEqual(list(c.iter_limits(page_size=3)), want)
        self.assertEqual(c.list_limits(), (want, None))
        with self.assertRaises(tollgate.ValidationError) as cm:
            c.list_limits(after="not-a-cursor")
        self.assertEqual(cm.exception.field, "after")

    def test_audit_records_the_principal(self):
        entity = uid("org")
        tollgate.Client(support.server().url, principal="ops-team").create_entity(entity)
        self.client.set_limits(["rpm:5"], entity=entity)
        events, nxt = self.client.audit_events(entity, limit=1)
        self.assertEqual([(e.action, e.principal) for e in events], [("entity.create", "ops-team")])
        self.assertEqual(nxt, events[0].id)
        more, _ = self.client.audit_events(entity, after=nxt)
        self.assertEqual([e.action for e in more], ["config.set"])
        self.assertEqual(more[0].details.get("limits"), "rpm:5/min")

    def test_audit_log_pages_the_namespace_by_time(self):
        name = uid("team")
        self.client.register_namespace(name)
        team = support.client(namespace=name)
        for e in ("org-1", "org-2", "org-3"):
            team.create_entity(e)
        events, nxt = team.audit_log(limit=2)
        self.assertEqual([e.entity for e in events], ["org-1", "org-2"])
        self.assertEqual(nxt, events[1].id)
        more, nxt = team.audit_log(after=nxt)
        self.assertEqual([e.entity for e in more], ["org-3"])
        self.assertIsNone(nxt)
        later = datetime.now(timezone.utc) + timedelta(hours=1)
        self.assertEqual(team.audit_log(since=later)[0], [])
        self.assertEqual(len(team.audit_log(until=later)[0]), 3)
        with self.assertRaises(tollgate.ValidationError) as cm:
            team.audit_log(after="not-an-id")
        self.assertEqual(cm.exception.field, "after")

    def test_per_call_principal_replaces_the_clients(self):
        c = support.client(principal="ops-team")
        entity, resource = uid("org"), uid("res")
        c.create_entity(entity, principal="alice")
        c.set_limits(["rpm:5", "slots:2/reserved"], entity=entity)  # the client's principal
        c.update_entity(entity, name="Acme", principal="bob")
        c.set_limits(["rpm:5"], entity=entity, resource=resource, principal="carol")
        c.delete_limits(entity=entity, resource=resource, principal="dave")
        c.penalize(entity, resource, ["rpm"], retry_after=1, principal="erin")
        c.reset(entity, resource, principal="frank")
        c.reserve(entity, resource, uid("j"), principal="grace")
        rid = uid("j")
        c.reserve(entity, resource, rid)
        c.release(rid, principal="heidi")
        lease = c.acquire(entity, resource, {"rpm": 1})
        lease.penalize(["rpm"], retry_after=1, principal="ivan")
        lease.rollback()
        events = []
        after = ""
        while True:
            page, after = self.client.audit_events(entity, after=after)
            events += page
            if not after:
                break
        self.assertEqual([(e.action, e.principal) for e in events], [
            ("entity.create", "alice"),
            ("config.set", "ops-team"),
            ("entity.update", "bob"),
            ("config.set", "carol"),
            ("config.delete", "dave"),
            ("limit.penalize", "erin"),
            ("limit.reset", "frank"),
            ("reservation.reserve", "grace"),
            ("reservation.reserve", "ops-team"),
            ("reservation.release", "heidi"),
            ("limit.penalize", "ivan"),
        ])
        c.delete_entity(entity, principal="judy")
        events, _ = self.client.audit_events(entity, after=events[-1].id)
        self.assertEqual([(e.action, e.principal) for e in events], [("entity.delete", "judy")])

    def test_per_call_principal_is_checked_before_the_call(self):
        entity = uid("org")
        for bad in ("x" * 257, "a\r\nX-Evil: 1", 7):
            with self.subTest(principal=bad):
                with self.assertRaises(tollgate.ValidationError) as cm:
                    self.client.create_entity(entity, principal=bad)
                self.assertEqual(cm.exception.field, "principal")
                self.assertIsNone(cm.exception.status)  # no call
        with self.assertRaises(tollgate.EntityNotFound):
            self.client.get_entity(entity)
        self.client.create_entity(entity, principal="é" * 128)  # 256 bytes: the most
        events, _ = self.client.audit_events(entity)
        self.assertEqual([(e.action, e.principal) for e in events], [("entity.create", "é" * 128)])
        support.client(principal="ops-é").delete_entity(entity)  # the client's, sent as UTF-8 too
        events, _ = self.client.audit_events(entity, after=events[-1].id)
        self.assertEqual([(e.action, e.principal) for e in events], [("entity.delete", "ops-é")])

    def test_usage_and_capacity(self):
        resource = self.limits_resource(["rpm:10"])
        self.client.acquire_and_commit(uid("key"), resource, {"rpm": 2})
        cap = self.client.capacity(resource)
        self.assertEqual((cap.resource, cap.entities), (resource, 1))
        self.assertEqual([(c.limit, c.capacity) for c in cap.limits], [("rpm", 10)])
        try:
            usage, _ = self.client.usage(resource=resource)
            self.assertIsInstance(usage, list)
            summary = self.client.usage_summary(resource=resource, window="day")
            self.assertGreater(summary.windows, 0)
        except tollgate.Unimplemented:
            pass  # a store that keeps no usage

    def test_top_denied(self):
        # A namespace of its own: the server follows 128 triples per namespace.
        name = uid("denied")
        self.client.register_namespace(name)
        c = support.client(namespace=name)
        resource, key = uid("api"), uid("key")
        c.set_limits(["rpm:1"], resource=resource)
        c.acquire_and_commit(key, resource, {"rpm": 1})
        for _ in range(2):
            with self.assertRaises(tollgate.RateLimitExceeded):
                c.acquire(key, resource, {"rpm": 1})
        self.assertEqual(c.top_denied(resource=resource, n=5),
                         [tollgate.DeniedEntity(entity=key, resource=resource, limit="rpm", count=2, error=0)])
        self.assertEqual(c.top_denied(resource=resource, limit="tpm"), [])
        with self.assertRaises(tollgate.ValidationError) as cm:
            c.top_denied(n=0)
        self.assertEqual(cm.exception.field, "n")


class NamespacesTest(ServerTest):
    def test_registry_and_isolation(self):
        name = uid("team")
        ns = self.client.register_namespace(name)
        self.assertEqual(ns.name, name)
        self.assertTrue(ns.id)
        self.assertIsNone(ns.deleted_at)
        self.assertIn(name, [n.name for n in self.client.list_namespaces()])
        self.assertEqual(self.client.get_namespace(name), ns)
        with self.assertRaises(tollgate.NamespaceExists):
            self.client.register_namespace(name)

        team = support.client(namespace=name)
        entity, resource = uid("key"), uid("res")
        team.set_limits(["rpm:1"], resource=resource)
        self.client.set_limits(["rpm:5"], resource=resource)  # "default": its own limits
        team.acquire_and_commit(entity, resource, {"rpm": 1})
        with self.assertRaises(tollgate.RateLimitExceeded):
            team.acquire(entity, resource, {"rpm": 1})
        self.assertEqual(self.available(entity, resource), {"rpm": 5})

        lease = team.acquire(uid("key"), uid("res"), {"rpm": 1}, limits=["rpm:3"])
        with self.assertRaises(tollgate.LeaseNotFound):
            self.client.resume_lease(lease.id)  # another namespace's lease

        self.client.delete_namespace(name)
        self.assertIsNotNone(self.client.get_namespace(name).deleted_at)
        with self.assertRaises(tollgate.NamespaceDeleted):
            team.acquire(entity, resource, {"rpm": 1})
        self.client.recover_namespace(name)
        self.assertEqual(team.available(entity, resource)[0].capacity, 1)
        self.client.delete_namespace(name)
        self.assertGreater(self.client.purge_namespace(name), 0)
        with self.assertRaises(tollgate.NamespaceNotFound):
            self.client.get_namespace(name)
        with self.assertRaises(tollgate.NamespaceNotFound):
            support.client(namespace=uid("unregistered")).acquire("k", "r", {"rpm": 1}, limits=["rpm:1"])


class HealthTest(ServerTest):
    def test_health_and_ready(self):
        self.assertEqual(self.client.health(), "ok")
        self.assertEqual(self.client.ready(), "ready")



class VersionsTest(ServerTest):
    """Optimistic locking: versions read back, a change on a stale version
    raises PreconditionFailed and changes nothing."""

    def test_entity_versions(self):
        org = uid("org")
        created = self.client.create_entity(org)
        self.assertEqual(created.version, 1)
        updated = self.client.update_entity(org, name="one", if_match=1)
        self.assertEqual((updated.name, updated.version), ("one", 2))
        with self.assertRaises(tollgate.PreconditionFailed) as cm:
            self.client.update_entity(org, name="stale", if_match=1)
        self.assertEqual((cm.exception.status, cm.exception.code), (412, "precondition_failed"))
        with self.assertRaises(tollgate.PreconditionFailed):
            self.client.delete_entity(org, if_match=1)
        got = self.client.get_entity(org)
        self.assertEqual((got.name, got.version), ("one", 2))
        with self.assertRaises(tollgate.ValidationError) as cm:
            self.client.update_entity(org, name="x", if_match=0)
        self.assertEqual(cm.exception.field, "if_match")
        self.client.delete_entity(org, if_match=2)

    def test_limits_versions(self):
        res = uid("res")
        stored = self.client.set_limits(["rpm:10"], resource=res, if_absent=True)
        self.assertEqual(stored.version, 1)
        with self.assertRaises(tollgate.PreconditionFailed):
            self.client.set_limits(["rpm:10"], resource=res, if_absent=True)
        self.assertEqual(self.client.set_limits(["rpm:20"], resource=res, if_match=1).version, 2)
        with self.assertRaises(tollgate.PreconditionFailed):
            self.client.set_limits(["rpm:5"], resource=res, if_match=1)
        with self.assertRaises(tollgate.PreconditionFailed):
            self.client.delete_limits(resource=res, if_match=1)
        got = self.client.get_limits(resource=res)
        self.assertEqual((got.limits, got.version), (["rpm:20/min"], 2))
        self.assertIn(2, [c.version for c in self.client.iter_limits() if c.resource == res])
        self.client.delete_limits(resource=res, if_match=2)

if __name__ == "__main__":
    unittest.main()
