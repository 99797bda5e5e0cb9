// Reservations, penalties, entities, limits, audit, namespaces, against a
// real tollgate serve.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Client,
  EntityExistsError,
  EntityNotFoundError,
  LeaseNotFoundError,
  NamespaceDeletedError,
  NamespaceExistsError,
  NamespaceNotFoundError,
  NotFoundError,
  PreconditionFailedError,
  RateLimitExceeded,
  ReservationConflictError,
  ReservationNotFoundError,
  ValidationError,
} from "../src/index.js";
import { type RunningServer, startServer, unique } from "./server.js";

let server: RunningServer;
let client: Client;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.url, timeoutMs: 5_000, principal: "ts-tests" });
});

after(async () => {
  await server?.stop();
});

describe("reservations", () => {
  const limits = ["clusters:2/reserved", "launches:10"];

  test("reserve is idempotent, conflicts across holders, is released, and is not found after", async () => {
    const team = unique("team");
    const id = `arn:aws:emr:eu-west-1:123:cluster/${unique("j")}`;
    const first = await client.reserve({ entity: team, resource: "emr", id, consume: { clusters: 1, launches: 1 }, limits });
    assert.equal(first.isNew, true);
    assert.equal(first.id, id);
    assert.equal(first.entity, team);
    assert.deepEqual(first.consumed, { clusters: 1, launches: 1 });
    assert.equal(first.statuses.find((s) => s.limit === "clusters")?.kind, "reserved");
    assert.equal(first.degraded, false);
    assert.ok(first.createdAtMs !== undefined);

    const again = await client.reserve({ entity: team, resource: "emr", id, limits });
    assert.equal(again.isNew, false);
    assert.equal(again.createdAtMs, first.createdAtMs);
    assert.deepEqual(again.statuses, []);

    const err = await client.reserve({ entity: unique("other"), resource: "emr", id, limits }).then(
      () => assert.fail("another entity reserved a held id"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ReservationConflictError, String(err));
    assert.equal(err.status, 409);
    assert.equal(err.reason, "reservation_conflict");

    const got = await client.getReservation(id);
    assert.equal(got.entity, team);
    assert.equal(got.resource, "emr");
    const page = await client.listReservations({ entity: team, resource: "emr" });
    assert.deepEqual(
      page.reservations.map((r) => r.id),
      [id],
    );
    assert.equal(page.next, undefined);

    await client.release(id);
    await assert.rejects(client.getReservation(id), ReservationNotFoundError);
    const gone = await client.release(id).then(
      () => assert.fail("released twice"),
      (e: unknown) => e,
    );
    assert.ok(gone instanceof ReservationNotFoundError && gone instanceof LeaseNotFoundError);
    assert.equal(gone.status, 404);
  });

  test("a full reserved limit is a RateLimitExceeded; paging lists them all", async () => {
    const team = unique("team");
    const a = await client.reserve({ entity: team, resource: "emr", id: "a", limits });
    const b = await client.reserve({ entity: team, resource: "emr", id: "b", limits, ttlMs: 60_000 });
    assert.deepEqual(a.consumed, { clusters: 1 });
    assert.ok(b.expiresAtMs !== undefined && b.expiresAtMs > Date.now());
    await assert.rejects(client.reserve({ entity: team, resource: "emr", id: "c", limits }), RateLimitExceeded);
    const p1 = await client.listReservations({ entity: team, limit: 1 });
    assert.deepEqual(
      p1.reservations.map((r) => r.id),
      ["a"],
    );
    assert.equal(p1.next, "a");
    const p2 = await client.listReservations({ entity: team, limit: 1, after: p1.next });
    assert.deepEqual(
      p2.reservations.map((r) => r.id),
      ["b"],
    );
    await client.release("a");
    await client.release("b");
    await assert.rejects(client.reserve({ entity: team, resource: "emr", id: "bad id", limits }), (e: unknown) => e instanceof ValidationError && e.field === "id");
  });
});

describe("leases", () => {
  test("listLeases pages the open durable leases, not the reservations", async () => {
    const team = unique("team");
    const limits = ["slots:5/concurrent", "clusters:5/reserved"];
    await client.reserve({ entity: team, resource: "jobs", id: unique("j"), consume: { clusters: 1 }, limits });
    const leases = [];
    for (let i = 0; i < 3; i++) leases.push(await client.acquire({ entity: team, resource: "jobs", consume: { slots: 1 }, limits }));
    const ids = leases.map((l) => l.id).sort();
    const p1 = await client.listLeases({ entity: team, resource: "jobs", limit: 2 });
    assert.deepEqual(
      p1.leases.map((l) => l.leaseId),
      ids.slice(0, 2),
    );
    assert.equal(p1.next, ids[1]);
    assert.deepEqual(p1.leases[0]?.consumed, { slots: 1 });
    assert.ok((p1.leases[0]?.expiresAtMs ?? 0) > Date.now());
    const p2 = await client.listLeases({ entity: team, after: p1.next, limit: 2 });
    assert.deepEqual(
      p2.leases.map((l) => l.leaseId),
      ids.slice(2),
    );
    assert.equal(p2.next, undefined);
    await assert.rejects(client.listLeases({ resource: "jobs" }), (e: unknown) => e instanceof ValidationError && e.field === "resource");
    for (const l of leases) await l.commit();
    assert.deepEqual((await client.listLeases({ entity: team })).leases, []);
  });
});

describe("penalize", () => {
  test("penalize, then acquires are RateLimitExceeded until the end", async () => {
    // POST /v1/penalize reads the stored limits (it takes limit names, not
    // limits), so they are stored here rather than given per call.
    const entity = unique("key");
    const resource = unique("openai");
    await client.setLimits({ resource }, { limits: ["rpm:600", "tpm:100000"] });
    await client.acquireAndCommit({ entity, resource, consume: { rpm: 1 } });
    await client.penalize({ entity, resource, retryAfterMs: 20_000, limits: ["rpm"], reason: "openai 429" });
    const err = await client.acquire({ entity, resource, consume: { rpm: 1 } }).then(
      () => assert.fail("granted during a penalty"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitExceeded);
    assert.ok(err.retryAfterMs >= 19_000, `retryAfterMs ${err.retryAfterMs}`);
    assert.equal(err.exceeded[0]?.limit, "rpm");

    await assert.rejects(
      client.penalize({ entity, resource, limits: ["rpm"] }),
      (e: unknown) => e instanceof ValidationError && e.field === "until_ms",
    );
  });

  test("reset lifts a penalty: the limits named, or every refilling one", async () => {
    const entity = unique("key");
    const resource = unique("openai");
    await client.setLimits({ resource }, { limits: ["rpm:600", "tpm:100000", "inflight:2/concurrent"] });
    await client.penalize({ entity, resource, retryAfterMs: 60_000, limits: ["rpm", "tpm"], reason: "openai 429" });
    await assert.rejects(client.acquireAndCommit({ entity, resource, consume: { rpm: 1 } }), RateLimitExceeded);

    await client.reset({ entity, resource, limits: ["rpm"], reason: "vendor back" });
    await client.acquireAndCommit({ entity, resource, consume: { rpm: 1 } }); // rpm refilled
    await assert.rejects(client.acquireAndCommit({ entity, resource, consume: { tpm: 1 } }), RateLimitExceeded); // tpm not

    await client.reset({ entity, resource }); // every refilling limit
    await client.acquireAndCommit({ entity, resource, consume: { rpm: 1, tpm: 100 } });
    // Refilled (and refilling since): 100000 less the 100 just taken, give or take refill.
    const tpm = (await client.available({ entity, resource })).find((s) => s.limit === "tpm")?.available ?? 0;
    assert.ok(tpm >= 99_900 && tpm <= 100_000, `tpm ${tpm}`);
    const events = await client.auditEvents({ entity });
    const resets = events.events.filter((e) => e.action === "limit.reset");
    assert.equal(resets.length, 2);
    assert.equal(resets[0]?.details?.["reason"], "vendor back");

    // Concurrency limits come back when leases end, not by reset; a limit
    // the bucket does not hold cannot be reset.
    for (const limits of [["inflight"], ["nope"]]) {
      await assert.rejects(
        client.reset({ entity, resource, limits }),
        (e: unknown) => e instanceof ValidationError && e.status === 400 && e.field === "limits",
      );
    }
    await assert.rejects(client.reset({ entity, resource, limits: [] }), (e: unknown) => e instanceof ValidationError && e.field === "limits");
    await client.reset({ entity: unique("nobody"), resource }); // no bucket: full already
  });

  test("lease.penalize penalizes the lease's entity and resource", async () => {
    const entity = unique("key");
    const limits = ["rpm:600", "tpm:100000"];
    await client.withLease({ entity, resource: "openai", consume: { rpm: 1, tpm: 10 }, limits }, async (lease) => {
      await lease.penalize({ untilMs: Date.now() + 30_000, limits: ["tpm"], reason: "vendor 429" });
      assert.equal(lease.open, true);
    });
    const err = await client.acquire({ entity, resource: "openai", consume: { rpm: 1, tpm: 10 }, limits }).then(
      () => assert.fail("granted during a penalty"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitExceeded);
    assert.ok(err.retryAfterMs >= 28_000, `retryAfterMs ${err.retryAfterMs}`);
  });
});

describe("entities and limits", () => {
  test("create, get, children, delete", async () => {
    const org = unique("org");
    const key = unique("key");
    const created = await client.createEntity({ id: org, name: "Acme", metadata: { tier: "gold" } });
    assert.equal(created.id, org);
    assert.equal(created.name, "Acme");
    assert.deepEqual(created.metadata, { tier: "gold" });
    assert.ok(created.createdAtMs !== undefined);
    await client.createEntity({ id: key, parentId: org, cascade: true });
    await assert.rejects(client.createEntity({ id: org }), EntityExistsError);
    await assert.rejects(client.createEntity({ id: unique("x"), parentId: "ghost" }), EntityNotFoundError);
    const got = await client.getEntity(key);
    assert.equal(got.parentId, org);
    assert.equal(got.cascade, true);
    assert.deepEqual(
      (await client.children(org)).map((e) => e.id),
      [key],
    );

    // A cascading acquire debits the parent's bucket too.
    await client.setLimits({ entity: org }, { limits: ["rpm:100"] });
    await client.setLimits({ entity: key, resource: "openai/gpt-4o" }, { limits: ["rpm:3"] });
    const grant = await client.acquireAndCommit({ entity: key, resource: "openai/gpt-4o", consume: { rpm: 1 } });
    // consumed is what was asked; each level's debit is its own status.
    assert.deepEqual(grant.consumed, { rpm: 1 });
    assert.deepEqual(
      grant.statuses.map((s) => [s.entity, s.capacity, s.available]),
      [
        [key, 3, 2],
        [org, 100, 99],
      ],
    );

    await client.deleteEntity(key);
    await assert.rejects(client.getEntity(key), (e: unknown) => e instanceof EntityNotFoundError && e.reason === "entity_not_found");
    await assert.rejects(client.deleteEntity(key), EntityNotFoundError);
  });

  test("limits set, get, delete at every scope", async () => {
    const org = unique("org");
    await client.createEntity({ id: org });
    const res = `vendor/${unique("model")}`;
    assert.deepEqual(await client.setLimits({ resource: res }, { limits: ["rpm:3", "tpm:10000:15000"] }), {
      limits: ["rpm:3/min", "tpm:10000/min:15000"],
      version: 1,
    });
    assert.deepEqual(await client.getLimits({ resource: res }), { limits: ["rpm:3/min", "tpm:10000/min:15000"], version: 1 });
    await client.setLimits({ entity: org }, { limits: ["rpm:100"] });
    await client.setLimits({ entity: org, resource: res }, { limits: ["rpm:10"] });
    assert.deepEqual(await client.getLimits({ entity: org }), { limits: ["rpm:100/min"], version: 1 });
    assert.deepEqual(await client.getLimits({ entity: org, resource: res }), { limits: ["rpm:10/min"], version: 1 });
    await client.deleteLimits({ entity: org, resource: res });
    await assert.rejects(client.getLimits({ entity: org, resource: res }), (e: unknown) => e instanceof NotFoundError && e.reason === "not_found");
    await assert.rejects(client.deleteLimits({ resource: unique("none") }), NotFoundError);
    await assert.rejects(client.setLimits({ resource: res }, { limits: ["rpm:x"] }), (e: unknown) => e instanceof ValidationError && e.field === "limit");
    await assert.rejects(client.setLimits({ entity: "ghost" }, { limits: ["rpm:1"] }), EntityNotFoundError);

    const sys = await client.setLimits({}, { limits: [], onUnavailable: "block" });
    assert.deepEqual([sys.limits, sys.onUnavailable], [[], "block"]);
    assert.ok((sys.version ?? 0) >= 1, `system limits at version ${sys.version}`); // other tests put them too
    await client.deleteLimits({});

    const audit = await client.auditEvents({ entity: org });
    assert.deepEqual(
      audit.events.map((e) => e.action),
      ["entity.create", "config.set", "config.set", "config.delete"],
    );
    assert.equal(audit.events[0]?.principal, "ts-tests");
    const firstPage = await client.auditEvents({ entity: org, limit: 1 });
    assert.equal(firstPage.events.length, 1);
    assert.equal(firstPage.next, firstPage.events[0]?.id);
  });

  test("the namespace's audit log pages every entity's events by time", async () => {
    const name = unique("team");
    await client.registerNamespace(name);
    const ns = new Client({ baseUrl: server.url, namespace: name });
    for (const id of ["org-1", "org-2", "org-3"]) await ns.createEntity({ id });
    const first = await ns.auditLog({ limit: 2 });
    assert.deepEqual(first.events.map((e) => e.entity), ["org-1", "org-2"]);
    assert.equal(first.next, first.events[1]?.id);
    const rest = await ns.auditLog({ after: first.next });
    assert.deepEqual(rest.events.map((e) => e.entity), ["org-3"]);
    assert.equal(rest.next, undefined);
    const later = Date.now() + 3_600_000;
    assert.equal((await ns.auditLog({ sinceMs: later })).events.length, 0);
    assert.equal((await ns.auditLog({ untilMs: later })).events.length, 3);
    await assert.rejects(ns.auditLog({ after: "not-an-id" }), (e: unknown) => e instanceof ValidationError && e.field === "after");
  });

  test("versions: read back, a change on a stale one refused (412) and nothing changed", async () => {
    const org = unique("org");
    assert.equal((await client.createEntity({ id: org })).version, 1);
    const updated = await client.updateEntity(org, { name: "one" }, { ifMatch: 1 });
    assert.equal(updated.version, 2);
    await assert.rejects(
      client.updateEntity(org, { name: "stale" }, { ifMatch: 1 }),
      (e: unknown) => e instanceof PreconditionFailedError && e.status === 412 && e.code === "precondition_failed",
    );
    await assert.rejects(client.deleteEntity(org, { ifMatch: 1 }), PreconditionFailedError);
    const got = await client.getEntity(org);
    assert.deepEqual([got.name, got.version], ["one", 2]);
    await assert.rejects(client.updateEntity(org, { name: "x" }, { ifMatch: 0 }), (e: unknown) => e instanceof ValidationError && e.field === "ifMatch");

    const res = unique("res");
    assert.equal((await client.setLimits({ resource: res }, { limits: ["rpm:10"] }, { ifAbsent: true })).version, 1);
    await assert.rejects(client.setLimits({ resource: res }, { limits: ["rpm:10"] }, { ifAbsent: true }), PreconditionFailedError);
    assert.equal((await client.setLimits({ resource: res }, { limits: ["rpm:20"] }, { ifMatch: 1 })).version, 2);
    await assert.rejects(client.setLimits({ resource: res }, { limits: ["rpm:5"] }, { ifMatch: 1 }), PreconditionFailedError);
    await assert.rejects(client.deleteLimits({ resource: res }, { ifMatch: 1 }), PreconditionFailedError);
    assert.deepEqual(await client.getLimits({ resource: res }), { limits: ["rpm:20/min"], version: 2 });
    const listed = (await client.listLimits({ limit: 1000 })).configs.find((c) => c.resource === res);
    assert.equal(listed?.version, 2);
    await client.deleteLimits({ resource: res }, { ifMatch: 2 });
    await client.deleteEntity(org, { ifMatch: 2 });
  });

  test("a call's own principal replaces the client's in the audit event", async () => {
    const org = unique("org");
    const res = unique("res");
    await client.createEntity({ id: org }, { principal: "alice" });
    await client.setLimits({ entity: org }, { limits: ["rpm:5", "slots:2/reserved"] }); // the client's: ts-tests
    await client.updateEntity(org, { name: "Acme" }, { principal: "bob" });
    await client.setLimits({ entity: org, resource: res }, { limits: ["rpm:5"] }, { principal: "carol" });
    await client.deleteLimits({ entity: org, resource: res }, { principal: "dave" });
    await client.penalize({ entity: org, resource: res, limits: ["rpm"], retryAfterMs: 1_000, principal: "erin" });
    await client.reset({ entity: org, resource: res, principal: "frank" });
    await client.reserve({ entity: org, resource: res, id: unique("j"), principal: "grace" });
    const rid = unique("j");
    await client.reserve({ entity: org, resource: res, id: rid });
    await client.release(rid, { principal: "heidi" });
    const lease = await client.acquire({ entity: org, resource: res, consume: { rpm: 1 } });
    await lease.penalize({ limits: ["rpm"], retryAfterMs: 1_000, principal: "ivan" });
    await lease.rollback();
    await client.deleteEntity(org, { principal: "judy" });
    // A principal in UTF-8, per call and the client's, arrives as it was.
    const other = unique("org");
    await client.createEntity({ id: other }, { principal: "é".repeat(128) }); // 256 bytes: the most
    await new Client({ baseUrl: server.url, principal: "ops-é" }).deleteEntity(other);

    const events = [];
    for (let after: string | undefined = ""; after !== undefined; ) {
      const page = await client.auditEvents({ entity: org, after });
      events.push(...page.events);
      after = page.next;
    }
    assert.deepEqual(
      events.map((e) => [e.action, e.principal]),
      [
        ["entity.create", "alice"],
        ["config.set", "ts-tests"],
        ["entity.update", "bob"],
        ["config.set", "carol"],
        ["config.delete", "dave"],
        ["limit.penalize", "erin"],
        ["limit.reset", "frank"],
        ["reservation.reserve", "grace"],
        ["reservation.reserve", "ts-tests"],
        ["reservation.release", "heidi"],
        ["limit.penalize", "ivan"],
        ["entity.delete", "judy"],
      ],
    );
    assert.deepEqual(
      (await client.auditEvents({ entity: other })).events.map((e) => [e.action, e.principal]),
      [
        ["entity.create", "é".repeat(128)],
        ["entity.delete", "ops-é"],
      ],
    );

    // A principal the server would refuse is refused before any call.
    const bad = unique("org");
    for (const principal of ["x".repeat(257), "a\r\nX-Evil: 1"]) {
      await assert.rejects(
        client.createEntity({ id: bad }, { principal }),
        (e: unknown) => e instanceof ValidationError && e.field === "principal" && e.status === undefined,
      );
    }
    await assert.rejects(client.getEntity(bad), EntityNotFoundError);
  });

  test("topDenied names the entities refused most", async () => {
    // A namespace of its own: the server follows 128 triples per namespace.
    const name = unique("denied");
    await client.registerNamespace(name);
    const ns = new Client({ baseUrl: server.url, namespace: name });
    const resource = unique("api");
    const entity = unique("key");
    await ns.setLimits({ resource }, { limits: ["rpm:1"] });
    await (await ns.acquire({ entity, resource, consume: { rpm: 1 } })).commit();
    for (let i = 0; i < 2; i++) await assert.rejects(ns.acquire({ entity, resource, consume: { rpm: 1 } }), RateLimitExceeded);
    assert.deepEqual(await ns.topDenied({ resource, n: 5 }), [{ entity, resource, limit: "rpm", count: 2, error: 0 }]);
    assert.deepEqual(await ns.topDenied({ resource, limit: "tpm" }), []);
    await assert.rejects(ns.topDenied({ n: 0 }), (e: unknown) => {
      assert.ok(e instanceof ValidationError);
      assert.equal(e.field, "n");
      return true;
    });
  });

  test("listEntities pages through a namespace's entities", async () => {
    // A namespace of its own, so that the listing holds only these.
    const name = unique("ents");
    await client.registerNamespace(name);
    const ns = new Client({ baseUrl: server.url, namespace: name });
    const ids = [unique("e-a"), unique("e-b"), unique("e-c")].sort();
    for (const id of ids) await ns.createEntity({ id, name: `n-${id}` });

    const p1 = await ns.listEntities({ limit: 2 });
    assert.deepEqual(
      p1.entities.map((e) => e.id),
      ids.slice(0, 2),
    );
    assert.equal(p1.entities[0]?.name, `n-${ids[0]}`);
    assert.equal(p1.next, ids[1]);
    const p2 = await ns.listEntities({ after: p1.next, limit: 2 });
    assert.deepEqual(
      p2.entities.map((e) => e.id),
      ids.slice(2),
    );
    assert.equal(p2.next, undefined); // not full: the last page
    assert.deepEqual(
      (await ns.listEntities()).entities.map((e) => e.id),
      ids,
    );
    await assert.rejects(ns.listEntities({ limit: 0 }), (e: unknown) => e instanceof ValidationError && e.field === "limit");
  });

  test("updateEntity changes name, parent and cascade; keeps the rest", async () => {
    const org = unique("org");
    const org2 = unique("org");
    const key = unique("key");
    await client.createEntity({ id: org });
    await client.createEntity({ id: org2 });
    const created = await client.createEntity({ id: key, name: "old", metadata: { team: "a" } });

    const renamed = await client.updateEntity(key, { name: "new" });
    assert.deepEqual(renamed, { ...created, name: "new", version: 2 });
    const moved = await client.updateEntity(key, { parentId: org, cascade: true });
    assert.equal(moved.parentId, org);
    assert.equal(moved.cascade, true);
    assert.equal(moved.name, "new");
    assert.deepEqual(await client.getEntity(key), moved);
    assert.deepEqual(
      (await client.children(org)).map((e) => e.id),
      [key],
    );
    assert.equal((await client.updateEntity(key, { parentId: org2 })).cascade, true); // kept
    const root = await client.updateEntity(key, { parentId: "", metadata: {} });
    assert.equal(root.parentId, undefined);
    assert.equal(root.cascade, undefined); // an empty parent stops the cascade
    assert.equal(root.metadata, undefined);
    assert.deepEqual(await client.getEntity(key), root);
    // An empty patch changes no field, and is a new version (a write, with its audit event).
    assert.deepEqual(await client.updateEntity(key, {}), { ...root, version: (root.version ?? 0) + 1 });

    await assert.rejects(client.updateEntity(unique("ghost"), { name: "x" }), (e: unknown) => e instanceof EntityNotFoundError && e.status === 404);
    await assert.rejects(client.updateEntity(key, { parentId: unique("ghost") }), EntityNotFoundError);
    await assert.rejects(client.updateEntity(key, { cascade: true }), (e: unknown) => e instanceof ValidationError && e.field === "cascade");
  });

  test("updateEntity refuses a cycle", async () => {
    const a = unique("a");
    const b = unique("b");
    const c = unique("c");
    await client.createEntity({ id: a });
    await client.createEntity({ id: b, parentId: a });
    await client.createEntity({ id: c, parentId: b, cascade: true });
    for (const parent of [c, b, a]) {
      await assert.rejects(
        client.updateEntity(a, { parentId: parent }),
        (e: unknown) => e instanceof ValidationError && e.status === 400 && e.field === "parent_id",
      );
    }
    assert.equal((await client.getEntity(a)).parentId, undefined);
  });

  test("listLimits lists every level, paged", async () => {
    const name = unique("lims");
    await client.registerNamespace(name);
    const ns = new Client({ baseUrl: server.url, namespace: name });
    const org = unique("org");
    const res = `openai/${unique("gpt")}`;
    await ns.createEntity({ id: org });
    await ns.setLimits({}, { limits: ["rpm:100"], onUnavailable: "allow" });
    await ns.setLimits({ resource: res }, { limits: ["rpm:3", "tpm:10000:15000"] });
    await ns.setLimits({ entity: org }, { limits: ["tpm:200000/hour"] });
    await ns.setLimits({ entity: org, resource: res }, { limits: ["rpm:7"] });
    const want = [
      { limits: ["rpm:100/min"], onUnavailable: "allow", version: 1 },
      { resource: res, limits: ["rpm:3/min", "tpm:10000/min:15000"], version: 1 },
      { entity: org, resource: "_default_", limits: ["tpm:200000/hour"], version: 1 },
      { entity: org, resource: res, limits: ["rpm:7/min"], version: 1 },
    ];

    const p1 = await ns.listLimits({ limit: 2 });
    assert.deepEqual(p1.configs, want.slice(0, 2));
    assert.ok(p1.next);
    const p2 = await ns.listLimits({ after: p1.next, limit: 2 });
    assert.deepEqual(p2.configs, want.slice(2));
    assert.ok(p2.next); // a full page: the following one is empty
    assert.deepEqual(await ns.listLimits({ after: p2.next, limit: 2 }), { configs: [] });
    assert.deepEqual(await ns.listLimits(), { configs: want });
    await assert.rejects(ns.listLimits({ after: "not-a-cursor" }), (e: unknown) => e instanceof ValidationError && e.field === "after");
  });

  test("available reports every limit in effect", async () => {
    const entity = unique("key");
    const st = await client.available({ entity, resource: "chat", limits: ["rpm:60", "inflight:5/concurrent"] });
    assert.deepEqual(
      st.map((s) => [s.limit, s.kind, s.capacity, s.available]),
      [
        ["rpm", "rate", 60, 60],
        ["inflight", "concurrency", 5, 5],
      ],
    );
  });
});

describe("namespaces", () => {
  test("register, use, delete, recover, purge", async () => {
    const name = unique("team");
    const ns = await client.registerNamespace(name);
    assert.equal(ns.name, name);
    assert.ok(ns.id);
    await assert.rejects(client.registerNamespace(name), NamespaceExistsError);
    assert.ok((await client.listNamespaces()).some((n) => n.name === name));
    assert.equal((await client.getNamespace(name)).id, ns.id);

    const inNs = new Client({ baseUrl: server.url, namespace: name });
    await inNs.acquireAndCommit({ entity: "k", resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"] });
    const ghost = new Client({ baseUrl: server.url, namespace: unique("ghost") });
    await assert.rejects(ghost.acquireAndCommit({ entity: "k", resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"] }), NamespaceNotFoundError);

    await client.deleteNamespace(name);
    assert.ok((await client.getNamespace(name)).deletedAtMs !== undefined);
    await assert.rejects(inNs.acquireAndCommit({ entity: "k", resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"] }), NamespaceDeletedError);
    await client.recoverNamespace(name);
    await inNs.acquireAndCommit({ entity: "k", resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"] });
    await client.deleteNamespace(name);
    const deleted = await client.purgeNamespace(name);
    assert.ok(deleted >= 1, `purged ${deleted}`);
    await assert.rejects(client.getNamespace(name), NamespaceNotFoundError);
    assert.throws(() => new Client({ baseUrl: server.url, namespace: "bad name" }), (e: unknown) => e instanceof ValidationError && e.field === "namespace");
  });

  test("health and ready", async () => {
    await client.health();
    await client.ready();
  });
});
