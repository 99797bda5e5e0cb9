// Retries are safe: idempotency keys on acquires, calls sent again when
// their answer is lost (a fetch that loses answers after the server acted),
// and how a lease that has ended says so, against a real tollgate serve.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Client,
  ConflictError,
  IdempotencyConflictError,
  Lease,
  LeaseClosedError,
  LeaseEndedError,
  ServerUnreachableError,
  ValidationError,
} from "../src/index.js";
import { LossyFetch } from "./lossy.js";
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

/** The available balance of each limit of the entity's own bucket. */
async function balances(entity: string, resource: string, limits: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const s of await client.available({ entity, resource, limits })) {
    if (s.entity === entity) out[s.limit] = s.available;
  }
  return out;
}

describe("lost answers", () => {
  test("an acquireAndCommit whose answer is lost is granted once, and the retry is replayed", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const entity = unique("key");
    const limits = ["rpm:10"];
    const before = lossy.lose(1);
    const grant = await c.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 3 }, limits });
    assert.equal(grant.replayed, true);
    assert.deepEqual(grant.consumed, { rpm: 3 });
    assert.deepEqual(grant.statuses, []); // a replayed grant has none
    assert.equal(lossy.sent - before, 2);
    const [first, second] = lossy.keys.slice(before);
    assert.match(first ?? "", /^tgc-[0-9a-f]{32}$/);
    assert.equal(second, first);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 7 }); // debited once

    // Another call is another key: granted, not replayed.
    const next = await c.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    assert.equal(next.replayed, false);
    assert.notEqual(lossy.keys.at(-1), first);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 6 });
  });

  test("an acquire whose answer is lost replays the lease", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const entity = unique("key");
    const limits = ["rpm:10"];
    lossy.lose(1);
    const lease = await c.acquire({ entity, resource: "chat", consume: { rpm: 2 }, limits });
    assert.equal(lease.replayed, true);
    assert.deepEqual(lease.consumed, { rpm: 2 });
    assert.deepEqual(lease.statuses, []);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 8 });
    await lease.commit();
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 8 });
  });

  test("a commit and a rollback whose answers are lost are done", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const entity = unique("key");
    const limits = ["rpm:10", "inflight:2/concurrent"];
    let lease = await c.acquire({ entity, resource: "gpu", consume: { rpm: 2, inflight: 1 }, limits });
    assert.equal(lease.replayed, false);
    let before = lossy.lose(1);
    const committed = await lease.commit(); // the second send is answered as the first commit
    assert.equal(lossy.sent - before, 2);
    assert.equal(committed.state, "committed");
    assert.deepEqual(committed.consumed, { rpm: 2, inflight: 1 });
    assert.equal(lease.state, "committed");

    lease = await c.acquire({ entity, resource: "gpu", consume: { rpm: 3, inflight: 1 }, limits });
    before = lossy.lose(1);
    const rolledBack = await lease.rollback(); // the second send finds it rolled back: done
    assert.equal(lossy.sent - before, 2);
    assert.equal(rolledBack.state, "rolled_back");
    assert.equal(lease.state, "rolled_back");
    assert.deepEqual(await balances(entity, "gpu", limits), { rpm: 8, inflight: 2 });
  });

  test("an extend whose answer is lost is sent again", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const lease = await c.acquire({ entity: unique("key"), resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"], leaseTtlMs: 5_000 });
    const first = lease.expiresAtMs ?? 0;
    const before = lossy.lose(1);
    await lease.extend(600_000);
    assert.equal(lossy.sent - before, 2);
    assert.ok((lease.expiresAtMs ?? 0) > first + 500_000);
    await lease.rollback();
  });

  test("an adjust whose answer is lost is not sent again", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const entity = unique("key");
    const limits = ["rpm:10", "tpm:1000"];
    const lease = await c.acquire({ entity, resource: "chat", consume: { rpm: 1, tpm: 100 }, limits });
    const before = lossy.lose(1);
    await assert.rejects(lease.adjust({ tpm: 50 }), (e: unknown) => e instanceof ServerUnreachableError && !e.timedOut);
    assert.equal(lossy.sent - before, 1); // adds up: sent once
    assert.equal(lease.open, true);
    const info = await lease.info();
    assert.deepEqual(info.consumed, { rpm: 1, tpm: 150 }); // the server did it, once
    await lease.rollback();
  });

  test("reads are sent again; three sends at most", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const entity = unique("key");
    const limits = ["rpm:10"];
    let before = lossy.lose(1);
    assert.equal((await c.available({ entity, resource: "chat", limits }))[0]?.available, 10);
    assert.equal(lossy.sent - before, 2);

    before = lossy.lose(5);
    await assert.rejects(c.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits }), ServerUnreachableError);
    assert.equal(lossy.sent - before, 3);
    assert.equal(new Set(lossy.keys.slice(before)).size, 1);
    lossy.lose(0);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 9 }); // granted once, however often sent
  });

  test("sends again only within the timeout", async () => {
    // 100 ms leaves room for the 50 ms pause before the second send, not
    // for the 200 ms one before a third.
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch, timeoutMs: 100 });
    const before = lossy.lose(5);
    const start = Date.now();
    await assert.rejects(c.acquireAndCommit({ entity: unique("key"), resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"] }), ServerUnreachableError);
    assert.ok(lossy.sent - before <= 2, `${lossy.sent - before} sends`);
    assert.ok(Date.now() - start < 200);
  });

  test("the caller's signal stops the sends again", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch });
    const reason = new Error("caller gave up");
    const ctrl = new AbortController();
    const before = lossy.lose(5);
    const call = c.acquireAndCommit({ entity: unique("key"), resource: "chat", consume: { rpm: 1 }, limits: ["rpm:10"], signal: ctrl.signal });
    // Abort during a pause: the first answer is lost within milliseconds,
    // and the pauses are 50 and 200 ms.
    setTimeout(() => ctrl.abort(reason), 100);
    await assert.rejects(call, (e: unknown) => e === reason);
    assert.ok(lossy.sent - before <= 2, `${lossy.sent - before} sends`);
  });

  test("without idempotency keys no key is sent, and no acquire sent again", async () => {
    const lossy = new LossyFetch();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch, idempotencyKeys: false });
    const limits = ["rpm:10"];
    let before = lossy.lose(1);
    await assert.rejects(c.acquireAndCommit({ entity: unique("key"), resource: "chat", consume: { rpm: 1 }, limits }), ServerUnreachableError);
    assert.equal(lossy.sent - before, 1);
    assert.deepEqual(lossy.keys.slice(before), [null]);

    // A key the caller gives is still sent, and the acquire sent again.
    const entity = unique("key");
    before = lossy.lose(1);
    const grant = await c.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits, idempotencyKey: unique("order") });
    assert.equal(grant.replayed, true);
    assert.equal(lossy.sent - before, 2);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 9 });
  });
});

describe("idempotency keys", () => {
  test("the caller's key replays its grant; once the lease has ended, the key says how", async () => {
    const entity = unique("key");
    const key = unique("order");
    const limits = ["rpm:10"];
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 2 }, limits, idempotencyKey: key });
    assert.equal(lease.replayed, false);
    const again = await client.acquire({ entity, resource: "chat", consume: { rpm: 2 }, limits, idempotencyKey: key });
    assert.equal(again.replayed, true);
    assert.equal(again.id, lease.id);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 8 });
    await lease.commit();
    const err = await client.acquire({ entity, resource: "chat", consume: { rpm: 2 }, limits, idempotencyKey: key }).then(
      () => assert.fail("acquire with the key of an ended lease succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof LeaseEndedError, String(err));
    assert.equal(err.status, 409);
    assert.equal(err.ended, "committed");

    const key2 = unique("order");
    const first = await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits, idempotencyKey: key2 });
    const second = await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits, idempotencyKey: key2 });
    assert.deepEqual([first.replayed, second.replayed], [false, true]);
    assert.deepEqual(second.consumed, { rpm: 1 });
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 7 });
  });

  test("the same key with another request is an IdempotencyConflictError", async () => {
    const entity = unique("key");
    const key = unique("order");
    const limits = ["rpm:10"];
    await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits, idempotencyKey: key });
    const err = await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 2 }, limits, idempotencyKey: key }).then(
      () => assert.fail("the key of another request was granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof IdempotencyConflictError, String(err));
    assert.ok(err instanceof ConflictError);
    assert.equal(err.status, 409);
    assert.equal(err.code, "conflict");
    assert.equal(err.reason, "idempotency_key_reused");
    await assert.rejects(client.acquire({ entity: unique("other"), resource: "chat", consume: { rpm: 1 }, limits, idempotencyKey: key }), IdempotencyConflictError);
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 9 }); // nothing more debited
  });

  test("a bad key is refused before any call", async () => {
    const c = new Client({ baseUrl: "http://127.0.0.1:1" });
    for (const key of ["", "x".repeat(256), "café", "a\tb", " order-1", "order-1 "]) {
      await assert.rejects(
        c.acquire({ entity: "k", resource: "r", consume: { rpm: 1 }, idempotencyKey: key }),
        (e: unknown) => e instanceof ValidationError && e.field === "idempotency_key",
        JSON.stringify(key),
      );
    }
    await assert.rejects(
      c.acquireAndCommit({ entity: "k", resource: "r", consume: { rpm: 1 }, idempotencyKey: "\u0001" }),
      (e: unknown) => e instanceof ValidationError && e.field === "idempotency_key",
    );
  });
});

describe("ended leases", () => {
  test("a committed lease through other handles: commit again succeeds, rollback says committed", async () => {
    const entity = unique("key");
    const limits = ["rpm:10"];
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    // Handles on the same lease, as other processes would hold them.
    const other = new Client({ baseUrl: server.url });
    const second = new Lease(other, entity, "chat", { lease_id: lease.id });
    const third = new Lease(other, entity, "chat", { lease_id: lease.id });
    await lease.commit();
    const info = await second.commit(); // committed already: answered as the first commit
    assert.equal(info.state, "committed");
    assert.deepEqual(info.consumed, { rpm: 1 });
    assert.equal(second.state, "committed");
    const err = await third.rollback().then(
      () => assert.fail("rollback of a committed lease succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof LeaseEndedError, String(err));
    assert.ok(err instanceof LeaseClosedError);
    assert.equal(err.status, 409);
    assert.equal(err.code, "conflict");
    assert.equal(err.reason, "lease_closed");
    assert.equal(err.ended, "committed");
    assert.equal(third.state, "lost");
    await assert.rejects(third.rollback(), (e: unknown) => e instanceof LeaseClosedError && !(e instanceof LeaseEndedError)); // no call now
    await assert.rejects(client.getLease(lease.id), (e: unknown) => e instanceof LeaseEndedError && e.ended === "committed");
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 9 });
  });

  test("a rolled-back lease through other handles: rollback again is done, commit says rolled_back", async () => {
    const entity = unique("key");
    const limits = ["rpm:10"];
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    const [second, third, fourth] = [1, 2, 3].map(() => new Lease(client, entity, "chat", { lease_id: lease.id }));
    await lease.rollback();
    const info = await second!.rollback(); // rolled back already: done
    assert.equal(info.state, "rolled_back");
    assert.equal(second!.state, "rolled_back");
    await assert.rejects(third!.commit(), (e: unknown) => e instanceof LeaseEndedError && e.ended === "rolled_back");
    await assert.rejects(fourth!.info(), (e: unknown) => e instanceof LeaseEndedError && e.ended === "rolled_back");
    assert.equal(fourth!.state, "lost");
    // Disposal of a lease that has ended elsewhere is not an error.
    await new Lease(client, entity, "chat", { lease_id: lease.id }).dispose();
    assert.deepEqual(await balances(entity, "chat", limits), { rpm: 10 });
  });
});
