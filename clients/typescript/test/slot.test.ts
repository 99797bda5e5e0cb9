// Client.slot: a lease kept alive while the work runs, as Go's WithSlot,
// with 2 s leases so that the work outlasts the expiry three times over
// (each extension then has a second of slack on a loaded machine).

import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { after, before, describe, test } from "node:test";

import { Client, LeaseClosedError, LeaseNotFoundError, RateLimitExceeded, SlotLostError } from "../src/index.js";
import { type RunningServer, startServer, unique } from "./server.js";

let server: RunningServer;
let client: Client;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.url, timeoutMs: 5_000 });
});

after(async () => {
  await server?.stop();
});

const ttlMs = 2_000;
const workMs = 3 * ttlMs + 200;
const lostTtlMs = 1_000; // the server's least lease TTL: a loss is seen within half of it

describe("slot", () => {
  test("a slot outlives its expiry while the work runs", async () => {
    const entity = unique("key");
    const resource = unique("slot");
    await client.setLimits({ resource }, { limits: ["jobs:2/concurrent"] });
    const control = await client.acquire({ entity, resource, consume: { jobs: 1 }, leaseTtlMs: ttlMs }); // never extended
    let firstExpiry = 0;
    let id = "";
    const out = await client.slot({ entity, resource, consume: { jobs: 1 }, leaseTtlMs: ttlMs }, async (lease, signal) => {
      id = lease.id;
      firstExpiry = lease.expiresAtMs ?? 0;
      await delay(workMs, undefined, { signal });
      assert.equal(lease.open, true);
      assert.ok((lease.expiresAtMs ?? 0) > firstExpiry + ttlMs, "extended at least twice");
      const again = await client.resumeLease(id); // another handle: the server still has it
      assert.deepEqual(again.consumed, { jobs: 1 });
      await assert.rejects(client.resumeLease(control.id), LeaseNotFoundError); // expired
      return "done";
    });
    assert.equal(out, "done");
    await assert.rejects(client.resumeLease(id), LeaseClosedError); // committed
  });

  test("a lost slot aborts the work's signal and rejects with SlotLostError", async () => {
    const entity = unique("key");
    const resource = unique("slot");
    await client.setLimits({ resource }, { limits: ["jobs:1/concurrent"] });
    const start = Date.now();
    let reached = false;
    const err = await client
      .slot({ entity, resource, consume: { jobs: 1 }, leaseTtlMs: lostTtlMs }, async (lease, signal) => {
        await (await client.resumeLease(lease.id)).rollback(); // ended elsewhere
        await delay(30_000, undefined, { signal }); // aborted at the next extension
        reached = true;
      })
      .then(
        () => assert.fail("resolved"),
        (e: unknown) => e,
      );
    assert.ok(err instanceof SlotLostError, `got ${String(err)}`);
    assert.ok(err instanceof LeaseClosedError);
    assert.ok((err as Error).cause instanceof LeaseClosedError);
    assert.equal(reached, false);
    assert.ok(Date.now() - start < 5_000);
  });

  test("a slot waits, and rolls back when the work throws", async () => {
    const entity = unique("key");
    const resource = unique("slot");
    await client.setLimits({ resource }, { limits: ["jobs:1/concurrent"] });
    const held = await client.acquire({ entity, resource, consume: { jobs: 1 } });
    await assert.rejects(
      client.slot({ entity, resource, consume: { jobs: 1 } }, () => assert.fail("ran without its slot")),
      RateLimitExceeded,
    );
    await held.commit();
    let id = "";
    await assert.rejects(
      client.slot({ entity, resource, consume: { jobs: 1 }, waitMs: 5_000 }, (lease) => {
        id = lease.id;
        throw new Error("boom");
      }),
      /boom/,
    );
    const e = await client.resumeLease(id).then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof LeaseClosedError && "ended" in e && e.ended === "rolled_back", String(e));
  });
});
