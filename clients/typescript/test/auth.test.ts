// API keys, against a real tollgate serve --keys.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, ForbiddenError, UnauthorizedError } from "../src/index.js";
import { type RunningServer, keysFile, newKey, startServer } from "./server.js";

let server: RunningServer;
let cleanup: (() => Promise<void>) | undefined;
const keys: Record<"admin" | "acquire" | "read", string> = { admin: "", acquire: "", read: "" };

before(async () => {
  const admin = await newKey("ops", "admin", "*");
  // The calls below send their own limits (available too): a key needs
  // allow_limits for that.
  const acquire = await newKey("checkout", "acquire", "default", { allowLimits: true });
  assert.match(acquire.line, / allow_limits$/);
  const read = await newKey("dashboard", "read", "default", { allowLimits: true });
  keys.admin = admin.key;
  keys.acquire = acquire.key;
  keys.read = read.key;
  const file = await keysFile([admin.line, acquire.line, read.line]);
  cleanup = file.cleanup;
  server = await startServer(["--keys", file.path]);
});

after(async () => {
  await server?.stop();
  await cleanup?.();
});

const args = { entity: "key-1", resource: "chat", consume: { rpm: 1 }, limits: ["rpm:100"] };

test("no key or an unknown key is an UnauthorizedError", async () => {
  const anon = new Client({ baseUrl: server.url });
  const err = await anon.acquire(args).then(
    () => assert.fail("granted without a key"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof UnauthorizedError, String(err));
  assert.equal(err.status, 401);
  await assert.rejects(new Client({ baseUrl: server.url, apiKey: "tg_wrong" }).acquire(args), UnauthorizedError);
  await anon.health(); // needs no key
});

test("a key's role and namespace bound what it may call", async () => {
  const acquirer = new Client({ baseUrl: server.url, apiKey: keys.acquire });
  const lease = await acquirer.acquire(args);
  await lease.commit();
  await assert.rejects(acquirer.setLimits({ resource: "chat" }, { limits: ["rpm:1"] }), ForbiddenError);
  await assert.rejects(new Client({ baseUrl: server.url, apiKey: keys.acquire, namespace: "other" }).acquire(args), ForbiddenError);

  const reader = new Client({ baseUrl: server.url, apiKey: keys.read });
  const st = await reader.available(args);
  assert.equal(st[0]?.limit, "rpm");
  const err = await reader.acquire(args).then(
    () => assert.fail("a read key acquired"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ForbiddenError, String(err));
  assert.equal(err.status, 403);
  assert.equal(err.code, "permission_denied");

  const admin = new Client({ baseUrl: server.url, apiKey: keys.admin });
  await admin.setLimits({ resource: "chat" }, { limits: ["rpm:5"] });
  assert.ok((await admin.listNamespaces()).some((n) => n.name === "default"));
  await assert.rejects(acquirer.listNamespaces(), ForbiddenError);
});
