// Stored API keys (createKey, listKeys, revokeKey), what a key may send
// (allowLimits, entity scope) and reset, against a tollgate serve of their
// own: a server without --keys starts authenticating as soon as its store
// holds a key, so the other tests' servers must never hold one.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Client,
  ConflictError,
  ForbiddenError,
  KeyExistsError,
  KeyNotFoundError,
  NotFoundError,
  RateLimitExceeded,
  UnauthorizedError,
  ValidationError,
} from "../src/index.js";
import { type RunningServer, keysFile, newKey, startServer, unique } from "./server.js";

let server: RunningServer;
let cleanup: (() => Promise<void>) | undefined;
const keys = { admin: "", globalAdmin: "", fileAcquire: "", fileOwnLimits: "" };
let admin: Client;

before(async () => {
  const a = await newKey("ops", "admin", "default");
  const g = await newKey("root-ops", "admin", "*");
  const plain = await newKey("file-checkout", "acquire", "default");
  const own = await newKey("file-gateway", "acquire", "default", { allowLimits: true });
  keys.admin = a.key;
  keys.globalAdmin = g.key;
  keys.fileAcquire = plain.key;
  keys.fileOwnLimits = own.key;
  const file = await keysFile([a.line, g.line, plain.line, own.line]);
  cleanup = file.cleanup;
  server = await startServer(["--keys", file.path]);
  admin = new Client({ baseUrl: server.url, apiKey: keys.admin, timeoutMs: 5_000 });
});

after(async () => {
  await server?.stop();
  await cleanup?.();
});

function client(apiKey: string, namespace?: string): Client {
  return new Client({ baseUrl: server.url, apiKey, namespace, timeoutMs: 5_000 });
}

async function limitedResource(limits: string[]): Promise<string> {
  const resource = unique("res");
  await admin.setLimits({ resource }, { limits });
  return resource;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => assert.fail("the call succeeded"),
    (e: unknown) => e,
  );
}

/** Every stored key of the client's namespace, following `next`. */
async function allKeys(c: Client): Promise<Map<string, unknown>> {
  const out = new Map<string, unknown>();
  let after: string | undefined;
  for (;;) {
    const page = await c.listKeys({ after, limit: 2 });
    for (const k of page.keys) out.set(k.name, k);
    if (page.next === undefined) return out;
    after = page.next;
  }
}

describe("stored keys", () => {
  test("create, use, list, revoke: then 401", async () => {
    const name = unique("checkout");
    const created = await admin.createKey({ name, role: "acquire" });
    assert.match(created.key, /^tg_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.name, name);
    assert.equal(created.namespace, "default");
    assert.equal(created.role, "acquire");
    assert.equal(created.allowLimits, false);
    assert.equal(created.entity, undefined);
    assert.equal(created.expiresAtMs, undefined);
    assert.ok(Math.abs(created.createdAtMs - Date.now()) < 60_000);

    const resource = await limitedResource(["rpm:10"]);
    const grant = await client(created.key).acquireAndCommit({ entity: "k", resource, consume: { rpm: 1 } });
    assert.deepEqual(grant.consumed, { rpm: 1 });

    const listed = await allKeys(admin);
    const { key: _secret, ...info } = created;
    assert.deepEqual(listed.get(name), info); // the same, without the secret
    assert.equal(listed.has("file-checkout"), false); // keys-file keys are not stored

    const exists = await rejection(admin.createKey({ name, role: "read" }));
    assert.ok(exists instanceof KeyExistsError && exists instanceof ConflictError, String(exists));
    assert.equal(exists.status, 409);
    assert.equal(exists.reason, "key_exists");

    await admin.revokeKey(name);
    const revoked = await rejection(client(created.key).acquireAndCommit({ entity: "k", resource, consume: { rpm: 1 } }));
    assert.ok(revoked instanceof UnauthorizedError, String(revoked));
    assert.equal(revoked.status, 401);
    assert.equal((await allKeys(admin)).has(name), false);

    const gone = await rejection(admin.revokeKey(name));
    assert.ok(gone instanceof KeyNotFoundError && gone instanceof NotFoundError, String(gone));
    assert.equal(gone.status, 404);
    assert.equal(gone.reason, "key_not_found");
  });

  test("with keys, the key is the principal whatever the call says", async () => {
    // The per-call principal is sent, but a server with API keys records
    // the key's name.
    const name = unique("audited");
    await admin.createKey({ name, role: "read", principal: "someone-else" });
    await admin.revokeKey(name, { principal: "someone-else" });
    const events = [];
    for (let after: string | undefined = ""; after !== undefined; ) {
      const page = await admin.auditEvents({ after });
      events.push(...page.events.filter((e) => e.details?.["name"] === name));
      after = page.next;
    }
    assert.deepEqual(
      events.map((e) => [e.action, e.principal]),
      [
        ["key.create", "ops"],
        ["key.revoke", "ops"],
      ],
    );
  });

  test("listKeys pages by name", async () => {
    const prefix = unique("page") + "-";
    const names = ["a", "b", "c"].map((c) => prefix + c);
    for (const name of names) await admin.createKey({ name, role: "read" });
    const first = await admin.listKeys({ after: prefix, limit: 2 });
    assert.deepEqual(
      first.keys.map((k) => k.name),
      names.slice(0, 2),
    );
    assert.equal(first.next, names[1]);
    const second = await admin.listKeys({ after: first.next, limit: 2 });
    assert.equal(second.keys[0]?.name, names[2]);
    await assert.rejects(admin.listKeys({ limit: 5000 }), (e: unknown) => e instanceof ValidationError && e.field === "limit");
  });

  test("expiry, roles and namespaces", async () => {
    const short = await admin.createKey({ name: unique("short"), role: "read", expiresInMs: 200 }); // rounded up to 1 s
    assert.equal((short.expiresAtMs ?? 0) - short.createdAtMs, 1_000);
    const reader = await admin.createKey({ name: unique("quarter"), role: "read", expiresInMs: 90 * 86_400_000 });
    assert.equal((reader.expiresAtMs ?? 0) - reader.createdAtMs, 90 * 86_400_000);

    const resource = await limitedResource(["rpm:10"]);
    assert.deepEqual((await client(reader.key).getLimits({ resource })).limits, ["rpm:10/min"]);
    const denied = await rejection(client(reader.key).acquire({ entity: "k", resource, consume: { rpm: 1 } }));
    assert.ok(denied instanceof ForbiddenError, String(denied));
    assert.equal(denied.field, ""); // a role refusal names no field
    await assert.rejects(client(keys.fileAcquire).createKey({ name: unique("nope"), role: "admin" }), ForbiddenError);
    await assert.rejects(client(keys.fileAcquire).listKeys(), ForbiddenError);

    // A key belongs to the namespace it was created in.
    const ns = unique("team");
    await client(keys.globalAdmin).registerNamespace(ns);
    const teamAdmin = await client(keys.globalAdmin, ns).createKey({ name: unique("team-admin"), role: "admin" });
    assert.equal(teamAdmin.namespace, ns);
    const team = client(teamAdmin.key); // works in its namespace without naming it
    await team.setLimits({ resource: "chat" }, { limits: ["rpm:1"] });
    await team.acquireAndCommit({ entity: "k", resource: "chat", consume: { rpm: 1 } });
    assert.ok((await allKeys(team)).has(teamAdmin.name));
    assert.equal((await allKeys(admin)).has(teamAdmin.name), false);
    await assert.rejects(client(teamAdmin.key, "default").listKeys(), ForbiddenError);
  });
});

describe("what a key may send", () => {
  test("its own limits and a looser unavailable mode need allowLimits", async () => {
    const resource = await limitedResource(["rpm:10"]);
    const plain = client((await admin.createKey({ name: unique("plain"), role: "acquire" })).key);
    await plain.acquireAndCommit({ entity: "k", resource, consume: { rpm: 1 } }); // the stored limits: fine

    const own = await rejection(plain.acquire({ entity: "k", resource, consume: { rpm: 1 }, limits: ["rpm:1000000"] }));
    assert.ok(own instanceof ForbiddenError, String(own));
    assert.equal(own.status, 403);
    assert.equal(own.code, "permission_denied");
    assert.equal(own.field, "limits");
    assert.match(own.reason ?? "", /allow_limits/);
    const mode = await rejection(plain.acquireAndCommit({ entity: "k", resource, consume: { rpm: 1 }, onUnavailable: "allow" }));
    assert.ok(mode instanceof ForbiddenError && mode.field === "on_unavailable", String(mode));
    const file = await rejection(client(keys.fileAcquire).acquire({ entity: "k", resource, consume: { rpm: 1 }, limits: ["rpm:1000000"] }));
    assert.ok(file instanceof ForbiddenError && file.field === "limits", String(file));
    // Nothing was debited by the refusals.
    assert.equal((await admin.available({ entity: "k", resource }))[0]?.available, 9);

    const allowed = await admin.createKey({ name: unique("own"), role: "acquire", allowLimits: true });
    assert.equal(allowed.allowLimits, true);
    const grant = await client(allowed.key).acquireAndCommit({
      entity: "k",
      resource: unique("res"),
      consume: { rpm: 1 },
      limits: ["rpm:5"],
      onUnavailable: "allow",
    });
    assert.equal(grant.statuses[0]?.capacity, 5);
    // The keys file's allow_limits grants the same.
    const fromFile = await client(keys.fileOwnLimits).acquireAndCommit({ entity: "k", resource: unique("res"), consume: { rpm: 1 }, limits: ["rpm:7"] });
    assert.equal(fromFile.statuses[0]?.capacity, 7);
  });

  test("a key confined to an entity acts on it and its descendants only", async () => {
    const org = unique("org");
    const teamId = unique("team");
    const other = unique("org");
    await admin.createEntity({ id: org });
    await admin.createEntity({ id: teamId, parentId: org });
    const created = await admin.createKey({ name: unique("org-gateway"), role: "acquire", entity: org });
    assert.equal(created.entity, org);
    const scoped = client(created.key);
    const resource = await limitedResource(["rpm:10"]);
    await scoped.acquireAndCommit({ entity: org, resource, consume: { rpm: 1 } });
    await scoped.acquireAndCommit({ entity: teamId, resource, consume: { rpm: 1 } }); // a descendant

    const beyond = await rejection(scoped.acquireAndCommit({ entity: other, resource, consume: { rpm: 1 } }));
    assert.ok(beyond instanceof ForbiddenError, String(beyond));
    assert.equal(beyond.status, 403);
    assert.equal(beyond.field, "entity");
    assert.ok(beyond.reason?.includes(other), beyond.reason);
    await assert.rejects(scoped.available({ entity: other, resource }), (e: unknown) => e instanceof ForbiddenError && e.field === "entity");

    // A confined admin key resets its entities only; an acquire key does not reset.
    const scopedAdmin = client((await admin.createKey({ name: unique("org-admin"), role: "admin", entity: org })).key);
    await scopedAdmin.reset({ entity: teamId, resource });
    await assert.rejects(scopedAdmin.reset({ entity: other, resource }), (e: unknown) => e instanceof ForbiddenError && e.field === "entity");
    await assert.rejects(scoped.reset({ entity: org, resource }), ForbiddenError);
  });

  test("reset by an admin key lifts a penalty, audited under the key's name", async () => {
    const resource = await limitedResource(["rpm:100", "tpm:10000"]);
    const entity = unique("key");
    const acquirer = client(keys.fileAcquire);
    await admin.penalize({ entity, resource, retryAfterMs: 60_000, limits: ["rpm", "tpm"], reason: "vendor 429" });
    await assert.rejects(acquirer.acquireAndCommit({ entity, resource, consume: { rpm: 1 } }), RateLimitExceeded);
    await admin.reset({ entity, resource, limits: ["rpm", "tpm"], reason: "vendor back" });
    await acquirer.acquireAndCommit({ entity, resource, consume: { rpm: 1, tpm: 10 } });
    const resets = (await admin.auditEvents({ entity })).events.filter((e) => e.action === "limit.reset");
    assert.equal(resets.length, 1);
    assert.equal(resets[0]?.principal, "ops");
    assert.equal(resets[0]?.details?.["reason"], "vendor back");
  });
});

describe("checked before calling", () => {
  test("bad arguments are ValidationErrors naming the field", async () => {
    const c = new Client({ baseUrl: "http://127.0.0.1:1" }); // nothing is sent
    const cases: [Promise<unknown>, string][] = [
      [c.createKey({ name: "", role: "acquire" }), "name"],
      [c.createKey({ name: "ci", role: "root" as "admin" }), "role"],
      [c.createKey({ name: "ci", role: "acquire", entity: "" }), "entity"],
      [c.createKey({ name: "ci", role: "acquire", expiresInMs: 0 }), "expires_in_s"],
      [c.createKey({ name: "ci", role: "acquire", expiresInMs: -5 }), "expires_in_s"],
      [c.revokeKey(""), "name"],
      [c.reset({ entity: "k", resource: "r", limits: [] }), "limits"],
    ];
    for (const [p, field] of cases) {
      await assert.rejects(p, (e: unknown) => e instanceof ValidationError && e.field === field, field);
    }
  });
});
