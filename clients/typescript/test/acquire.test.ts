// Acquire, leases, waiting, against a real tollgate serve.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, Lease, LeaseClosedError, LeaseEndedError, LeaseNotFoundError, RateLimitExceeded, ValidationError } from "../src/index.js";
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

/** The available balance of one limit of the entity's own bucket. */
async function balance(entity: string, resource: string, limit: string, limits?: string[]): Promise<number> {
  const st = await client.available({ entity, resource, limits });
  const s = st.find((x) => x.entity === entity && x.limit === limit);
  assert.ok(s, `no status of ${limit} for ${entity}`);
  return s.available;
}

describe("acquire and leases", () => {
  test("a shadow limit is debited and never denies", async () => {
    const entity = unique("key");
    const resource = unique("shadow");
    const stored = await client.setLimits({ resource }, { limits: ["rpm:2", "tpm:100"], shadow: ["tpm"] });
    assert.deepEqual(stored.shadow, ["tpm"]);
    assert.deepEqual((await client.getLimits({ resource })).shadow, ["tpm"]);
    const lease = await client.acquire({ entity, resource, consume: { rpm: 1, tpm: 150 } });
    const tpm = lease.statuses.find((s) => s.limit === "tpm");
    assert.equal(tpm?.exceeded, true);
    assert.equal(tpm?.shadow, true);
    assert.equal(tpm?.available, -50);
    assert.equal(lease.statuses.find((s) => s.limit === "rpm")?.shadow, undefined);
    assert.equal(tpm?.source, "resource");
    await lease.commit();
    await (await client.acquire({ entity, resource, consume: { rpm: 1 } })).commit();
    await assert.rejects(client.acquire({ entity, resource, consume: { rpm: 1, tpm: 1 } }), (e: unknown) => {
      assert.ok(e instanceof RateLimitExceeded);
      assert.deepEqual(e.exceeded.map((s) => s.limit), ["rpm"]);
      return true;
    });
    await assert.rejects(client.setLimits({ resource }, { limits: ["rpm:1"], shadow: ["tpm"] }), (e: unknown) => {
      assert.ok(e instanceof ValidationError);
      assert.equal(e.field, "shadow");
      return true;
    });
  });

  test("alert thresholds are stored and read back", async () => {
    const resource = unique("alerts");
    const stored = await client.setLimits({ resource }, { limits: ["rpm:100"], alertAt: [0.8, 1] });
    assert.deepEqual(stored.alertAt, [0.8, 1]);
    assert.deepEqual((await client.getLimits({ resource })).alertAt, [0.8, 1]);
    assert.equal((await client.setLimits({ resource }, { limits: ["rpm:100"] })).alertAt, undefined);
    await assert.rejects(client.setLimits({ resource }, { limits: ["rpm:1"], alertAt: [0.9, 0.8] }), (e: unknown) => {
      assert.ok(e instanceof ValidationError);
      assert.equal(e.field, "alert_at");
      return true;
    });
  });

  test("acquire, adjust, commit", async () => {
    const entity = unique("key");
    await client.setLimits({ resource: "gpt" }, { limits: ["rpm:10", "tpm:10000"] });
    const lease = await client.acquire({ entity, resource: "gpt", consume: { rpm: 1, tpm: 500 } });
    assert.match(lease.id, /^[0-9a-f]{32}$/);
    assert.equal(lease.entity, entity);
    assert.equal(lease.degraded, false);
    assert.deepEqual(lease.consumed, { rpm: 1, tpm: 500 });
    assert.equal(lease.statuses.length, 2);
    const tpm = lease.statuses.find((s) => s.limit === "tpm");
    assert.deepEqual(tpm, {
      entity,
      resource: "gpt",
      limit: "tpm",
      kind: "rate",
      capacity: 10000,
      available: 9500,
      requested: 500,
      exceeded: false,
      source: "resource",
      retryAfterMs: 0,
      windowMs: 60000, // a minute's refill fills it
    });
    assert.ok(lease.expiresAtMs !== undefined && lease.expiresAtMs > Date.now());

    const adjusted = await lease.adjust({ tpm: 700 });
    assert.deepEqual(adjusted.consumed, { rpm: 1, tpm: 1200 });
    assert.equal(adjusted.state, "open");
    assert.deepEqual(lease.consumed, { rpm: 1, tpm: 1200 });

    const info = await client.getLease(lease.id);
    assert.equal(info.state, "open");
    assert.equal(info.entity, entity);

    const committed = await lease.commit();
    assert.equal(committed.state, "committed");
    assert.equal(lease.state, "committed");
    assert.equal(lease.open, false);
    assert.equal(lease.expiresAtMs, undefined);
    assert.deepEqual(lease.consumed, { rpm: 1, tpm: 1200 });
    // The adjustment reached the bucket (refill may have added a little).
    const left = await balance(entity, "gpt", "tpm");
    assert.ok(left >= 8800 && left < 8900, `tpm left ${left}`);

    await assert.rejects(lease.commit(), LeaseClosedError);
    await assert.rejects(client.getLease(lease.id), (e: unknown) => e instanceof LeaseEndedError && e.status === 409 && e.ended === "committed");
  });

  test("rollback gives everything back", async () => {
    const entity = unique("key");
    const limits = ["rpm:5"];
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 3 }, limits });
    assert.equal(await balance(entity, "chat", "rpm", limits), 2);
    const info = await lease.rollback();
    assert.equal(info.state, "rolled_back");
    assert.deepEqual(info.consumed, {});
    assert.equal(lease.state, "rolled_back");
    assert.equal(await balance(entity, "chat", "rpm", limits), 5);
    await assert.rejects(lease.adjust({ rpm: 1 }), LeaseClosedError);
  });

  test("a lease ended elsewhere is lost for this handle", async () => {
    const entity = unique("key");
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits: ["rpm:5"] });
    const other = new Client({ baseUrl: server.url });
    const info = await other.getLease(lease.id);
    assert.equal(info.state, "open");
    // Commit through the raw route, as another process would.
    const r = await fetch(`${server.url}/v1/leases/${lease.id}/commit`, { method: "POST" });
    assert.equal(r.status, 200);
    const err = await lease.extend(60_000).then(
      () => assert.fail("extend of a lease committed elsewhere succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof LeaseEndedError, String(err));
    assert.ok(err instanceof LeaseClosedError);
    assert.ok(err instanceof LeaseNotFoundError);
    assert.equal(err.status, 409);
    assert.equal(err.reason, "lease_closed");
    assert.equal(err.ended, "committed");
    assert.equal(lease.state, "lost");
    await assert.rejects(lease.commit(), (e: unknown) => e instanceof LeaseClosedError && e.status === undefined); // no call now
  });

  test("a lease the server never granted is lost for this handle", async () => {
    // 404 lease_not_found (never granted, or forgotten): a LeaseClosedError too.
    const entity = unique("key");
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits: ["rpm:5"] });
    const ghost = new Lease(client, entity, "chat", { lease_id: "0".repeat(32) });
    const err = await ghost.commit().then(
      () => assert.fail("commit of a lease never granted succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof LeaseClosedError && !(err instanceof LeaseEndedError), String(err));
    assert.equal(err.status, 404);
    assert.equal(err.reason, "lease_not_found");
    assert.equal(ghost.state, "lost");
    await lease.rollback();
  });

  test("resumeLease is a handle on an open lease, by its id", async () => {
    const entity = unique("key");
    const limits = ["rpm:10", "tpm:1000/day"];
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1, tpm: 10 }, limits });
    const other = new Client({ baseUrl: server.url });
    const resumed = await other.resumeLease(lease.id);
    assert.ok(resumed instanceof Lease);
    assert.equal(resumed.id, lease.id);
    assert.equal(resumed.entity, entity);
    assert.equal(resumed.resource, "chat");
    assert.equal(resumed.state, "open");
    assert.equal(resumed.degraded, false);
    assert.equal(resumed.replayed, false);
    assert.deepEqual(resumed.consumed, { rpm: 1, tpm: 10 });
    assert.deepEqual(resumed.statuses, []); // the server keeps only what the lease consumed
    assert.equal(resumed.expiresAtMs, lease.expiresAtMs);

    await resumed.adjust({ tpm: 5 });
    const committed = await resumed.commit();
    assert.equal(committed.state, "committed");
    assert.deepEqual(committed.consumed, { rpm: 1, tpm: 15 });
    assert.equal(resumed.state, "committed");
    assert.equal(await balance(entity, "chat", "tpm", limits), 985);

    // The first handle learns from the server that the lease has ended.
    await assert.rejects(lease.info(), (e: unknown) => e instanceof LeaseEndedError && e.status === 409 && e.ended === "committed");
    assert.equal(lease.state, "lost");
    await assert.rejects(client.resumeLease(lease.id), (e: unknown) => e instanceof LeaseEndedError && e.ended === "committed");
    await assert.rejects(
      client.resumeLease("0".repeat(32)),
      (e: unknown) => e instanceof LeaseNotFoundError && !(e instanceof LeaseClosedError) && e.status === 404,
    );

    // A commit through the first handle, after one through the resumed
    // handle, is answered as the first commit; a rollback is a LeaseEndedError.
    const second = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    await (await client.resumeLease(second.id)).commit();
    const again = await second.commit();
    assert.equal(again.state, "committed");
    const third = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    await (await client.resumeLease(third.id)).commit();
    await assert.rejects(third.rollback(), (e: unknown) => e instanceof LeaseEndedError && e.ended === "committed");
    assert.equal(third.state, "lost");
  });

  test("extend moves the expiry", async () => {
    const entity = unique("key");
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits: ["rpm:5"], leaseTtlMs: 2_000 });
    const first = lease.expiresAtMs ?? 0;
    assert.ok(first <= Date.now() + 2_500, "lease_ttl_ms was not applied");
    const info = await lease.extend(60_000);
    assert.ok((info.expiresAtMs ?? 0) > first + 50_000);
    assert.equal(lease.expiresAtMs, info.expiresAtMs);
    await assert.rejects(lease.extend(0), (e: unknown) => e instanceof ValidationError && e.field === "ttl_ms");
    await lease.commit();
  });

  test("429 is a RateLimitExceeded with retryAfterMs and statuses", async () => {
    const entity = unique("key");
    const limits = ["rpm:2", "tpm:1000"];
    const grant = await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 2 }, limits });
    assert.deepEqual(grant.consumed, { rpm: 2 });
    assert.equal(grant.degraded, false);
    const err = await client.acquire({ entity, resource: "chat", consume: { rpm: 1, tpm: 10 }, limits }).then(
      () => assert.fail("acquire beyond the limit was granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitExceeded, String(err));
    assert.equal(err.status, 429);
    assert.equal(err.code, "rate_limited");
    // 1 token of rpm:2/min comes back in 30 s.
    assert.ok(err.retryAfterMs > 25_000 && err.retryAfterMs <= 30_000, `retryAfterMs ${err.retryAfterMs}`);
    assert.equal(err.statuses.length, 2);
    const rpm = err.statuses.find((s) => s.limit === "rpm");
    assert.equal(rpm?.exceeded, true);
    assert.equal(rpm?.requested, 1);
    assert.equal(rpm?.retryAfterMs, err.retryAfterMs);
    assert.equal(err.statuses.find((s) => s.limit === "tpm")?.exceeded, false);
    assert.deepEqual(
      err.exceeded.map((s) => s.limit),
      ["rpm"],
    );
    assert.match(err.message, /rate limited/);
  });

  test("a validation error names the field", async () => {
    const entity = unique("key");
    const err = await client.acquire({ entity, resource: "chat", consume: { rpm: 1000 }, limits: ["rpm:100"] }).then(
      () => assert.fail("acquire above capacity was granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.field, "consume.rpm");
    assert.equal(err.value, "1000");
    assert.match(err.message, /consume\.rpm/);

    await assert.rejects(
      client.acquire({ entity, resource: "chat", consume: { nope: 1 }, limits: ["rpm:100"] }),
      (e: unknown) => e instanceof ValidationError && e.field === "consume.nope",
    );
    await assert.rejects(
      client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits: ["rpm:100"], leaseTtlMs: 10 }),
      (e: unknown) => e instanceof ValidationError && e.field === "lease_ttl_ms",
    );
    await assert.rejects(
      client.acquire({ entity: unique("nolimits"), resource: "unconfigured", consume: { rpm: 1 } }),
      (e: unknown) => e instanceof ValidationError && e.field === "limits",
    );
    // A lease gives back at most what it took.
    const lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 1 }, limits: ["rpm:100"] });
    await assert.rejects(lease.adjust({ rpm: -2 }), (e: unknown) => e instanceof ValidationError && e.field === "consume.rpm");
    assert.equal(lease.open, true);
    await lease.rollback();
  });
});

describe("withLease and await using", () => {
  test("withLease commits when the function resolves", async () => {
    const entity = unique("key");
    const limits = ["rpm:5", "tpm:1000"];
    let seen: string | undefined;
    const out = await client.withLease({ entity, resource: "chat", consume: { rpm: 1, tpm: 100 }, limits }, async (lease) => {
      seen = lease.id;
      await lease.adjust({ tpm: 50 });
      return "done";
    });
    assert.equal(out, "done");
    assert.ok(seen);
    await assert.rejects(client.getLease(seen), (e: unknown) => e instanceof LeaseEndedError && e.ended === "committed");
    assert.equal(await balance(entity, "chat", "rpm", limits), 4);
    const tpm = await balance(entity, "chat", "tpm", limits);
    assert.ok(tpm >= 850 && tpm < 860, `tpm ${tpm}`);
  });

  test("withLease rolls back when the function throws", async () => {
    const entity = unique("key");
    const limits = ["rpm:5"];
    const boom = new Error("boom");
    let held: import("../src/index.js").Lease | undefined;
    await assert.rejects(
      client.withLease({ entity, resource: "chat", consume: { rpm: 2 }, limits }, async (lease) => {
        held = lease;
        assert.equal(await balance(entity, "chat", "rpm", limits), 3);
        throw boom;
      }),
      (e: unknown) => e === boom,
    );
    assert.equal(held?.state, "rolled_back");
    assert.equal(await balance(entity, "chat", "rpm", limits), 5);
  });

  test("withLease leaves a lease the function ended alone", async () => {
    const entity = unique("key");
    const limits = ["rpm:5"];
    await client.withLease({ entity, resource: "chat", consume: { rpm: 2 }, limits }, (lease) => lease.rollback());
    assert.equal(await balance(entity, "chat", "rpm", limits), 5);
  });

  test("await using rolls back an unended lease and leaves a committed one", async () => {
    const entity = unique("key");
    const limits = ["rpm:5"];
    {
      await using lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 2 }, limits });
      assert.equal(lease.open, true);
      assert.equal(await balance(entity, "chat", "rpm", limits), 3);
    }
    assert.equal(await balance(entity, "chat", "rpm", limits), 5);
    {
      await using lease = await client.acquire({ entity, resource: "chat", consume: { rpm: 2 }, limits });
      await lease.commit();
    }
    assert.equal(await balance(entity, "chat", "rpm", limits), 3);
  });
});

describe("wait", () => {
  test("timeUntilAvailable says how long refill needs", async () => {
    const entity = unique("key");
    const limits = ["rpm:2/min"]; // a token every 30 s
    assert.equal(await client.timeUntilAvailable({ entity, resource: "chat", consume: { rpm: 1 }, limits }), 0);
    await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 2 }, limits });
    const ms = await client.timeUntilAvailable({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    assert.ok(ms > 25_000 && ms <= 30_000, `${ms} ms`);
    await assert.rejects(client.timeUntilAvailable({ entity, resource: "chat", consume: {}, limits }), ValidationError);
  });

  test("wait is granted after the refill of a 1/sec limit", async () => {
    const entity = unique("key");
    const limits = ["rps:1/sec"];
    await client.acquireAndCommit({ entity, resource: "chat", consume: { rps: 1 }, limits });
    const start = Date.now();
    const lease = await client.wait({ entity, resource: "chat", consume: { rps: 1 }, limits, waitMs: 5_000 });
    const waited = Date.now() - start;
    assert.ok(waited >= 500 && waited < 3_000, `waited ${waited} ms`);
    await lease.commit();
  });

  test("wait gives up at once when the next try comes after waitMs", async () => {
    const entity = unique("key");
    const limits = ["rpm:1"];
    await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    const start = Date.now();
    const err = await client.wait({ entity, resource: "chat", consume: { rpm: 1 }, limits, waitMs: 1_000 }).then(
      () => assert.fail("granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitExceeded);
    assert.ok(err.retryAfterMs > 1_000);
    assert.ok(Date.now() - start < 1_000, "wait slept in vain");
  });

  test("wait stops when its signal aborts", async () => {
    const entity = unique("key");
    const limits = ["rpm:1"];
    await client.acquireAndCommit({ entity, resource: "chat", consume: { rpm: 1 }, limits });
    const reason = new Error("caller gave up");
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(reason), 200);
    const start = Date.now();
    await assert.rejects(client.wait({ entity, resource: "chat", consume: { rpm: 1 }, limits, signal: ctrl.signal }), (e: unknown) => e === reason);
    assert.ok(Date.now() - start < 2_000);
  });

  test("wait on a full slot makes about one acquire a second", async () => {
    // Issue 21: a waiter on a full slot polled at the 100 ms hint. Now
    // about once a second, and once more at the end: at most N+1 in N s.
    const entity = unique("key");
    const limits = ["slots:1/concurrent"];
    const held = await client.acquire({ entity, resource: "gpu", consume: { slots: 1 }, limits });
    let acquires = 0;
    const counting = new Client({
      baseUrl: server.url,
      timeoutMs: 5_000,
      fetch: (input, init) => {
        if (String(input).includes("/v1/acquire")) acquires++;
        return fetch(input, init);
      },
    });
    const start = Date.now();
    const err = await counting.wait({ entity, resource: "gpu", consume: { slots: 1 }, limits, waitMs: 3_000 }).then(
      () => assert.fail("granted"),
      (e: unknown) => e,
    );
    const waited = Date.now() - start;
    await held.commit();
    assert.ok(err instanceof RateLimitExceeded);
    assert.equal(err.waits, "expiry"); // the holder's lease expires in minutes
    assert.ok(waited >= 2_900, `gave up after ${waited} ms: a slot may come back at any time`);
    assert.ok(acquires >= 3 && acquires <= 4, `${acquires} acquires in ${waited} ms`);
  });

  test("wait on a full slot is woken at once by a release of the same client", async () => {
    // Issue 21: in one process, a release wakes a waiter at once rather
    // than at its next look, about a second later.
    const entity = unique("key");
    const limits = ["slots:1/concurrent"];
    let refused!: () => void;
    const wasRefused = new Promise<void>((resolve) => (refused = resolve));
    let acquires = 0;
    const c = new Client({
      baseUrl: server.url,
      timeoutMs: 5_000,
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (String(input).includes("/v1/acquire") && ++acquires === 2 && res.status === 429) refused();
        return res;
      },
    });
    const held = await c.acquire({ entity, resource: "gpu", consume: { slots: 1 }, limits, leaseTtlMs: 600_000 });
    const waiting = c.wait({ entity, resource: "gpu", consume: { slots: 1 }, limits, waitMs: 10_000 });
    await wasRefused; // asleep, or about to be: a release from now on wakes it
    const released = Date.now();
    await held.commit();
    const lease = await waiting;
    const took = Date.now() - released;
    await lease.commit();
    assert.equal(acquires, 3, "the holder's, the refused one, the granted one");
    assert.ok(took < 500, `granted ${took} ms after the release: woken, not at the next look`);
  });

  test("deep debt says millennia, and wait neither spins nor gives up", async () => {
    // Issue 21: 10^12 tokens of debt at 1/s is about 31,700 years.
    const entity = unique("key");
    const limits = ["rps:1/sec"];
    const lease = await client.acquire({ entity, resource: "chat", consume: { rps: 1 }, limits });
    await lease.adjust({ rps: 1e12 });
    await lease.commit();
    const wantMs = (1e12 + 1) * 1000;
    const err = await client.acquire({ entity, resource: "chat", consume: { rps: 1 }, limits }).then(
      () => assert.fail("granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitExceeded);
    // Less the few milliseconds of refill since the debt.
    assert.ok(err.retryAfterMs > wantMs - 10_000 && err.retryAfterMs <= wantMs, `${err.retryAfterMs} ms`);
    assert.equal(err.waits, undefined);
    const ms = await client.timeUntilAvailable({ entity, resource: "chat", consume: { rps: 1 }, limits });
    assert.ok(ms > wantMs - 10_000 && ms <= wantMs, `${ms} ms`);
    // Without waitMs, wait sleeps the 31,700 years: a setTimeout that long
    // would fire at once, and wait would spin.
    let acquires = 0;
    const counting = new Client({
      baseUrl: server.url,
      timeoutMs: 5_000,
      fetch: (input, init) => {
        if (String(input).includes("/v1/acquire")) acquires++;
        return fetch(input, init);
      },
    });
    const reason = new Error("caller gave up");
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(reason), 300);
    await assert.rejects(counting.wait({ entity, resource: "chat", consume: { rps: 1 }, limits, signal: ctrl.signal }), (e: unknown) => e === reason);
    assert.equal(acquires, 1);
  });

  test("a full reserved limit waits for a release, with no retry-after", async () => {
    const entity = unique("team");
    const limits = ["clusters:1/reserved"];
    await client.reserve({ entity, resource: "emr", id: unique("j"), limits });
    const err = await client.reserve({ entity, resource: "emr", id: unique("j"), limits }).then(
      () => assert.fail("reserved"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitExceeded);
    assert.equal(err.retryAfterMs, 0);
    assert.equal(err.waits, "release");
    assert.equal(err.exceeded[0]?.waits, "release");
    assert.deepEqual(err.backoff(), { sleepMs: 1_000, leastMs: 0 });
  });

  test("withLease with waitMs waits for its slot", async () => {
    const entity = unique("key");
    const limits = ["inflight:1/concurrent"];
    const first = await client.acquire({ entity, resource: "gpu", consume: { inflight: 1 }, limits });
    setTimeout(() => void first.commit(), 300);
    const out = await client.withLease({ entity, resource: "gpu", consume: { inflight: 1 }, limits, waitMs: 5_000 }, () => 42);
    assert.equal(out, 42);
    assert.equal(await balance(entity, "gpu", "inflight", limits), 1);
  });
});
