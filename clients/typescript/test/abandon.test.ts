// Acquires of unknown outcome are abandoned (src/abandon.ts): against a
// real tollgate serve through a fetch that loses answers, and, for each
// kind of outcome, against canned answers.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  type Abandoned,
  Client,
  RateLimitExceeded,
  ServerUnreachableError,
  UnavailableError,
  idempotencyKeyHeader,
  idempotentLeaseId,
  maxAbandoning,
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

/** The abandonments a client reported, in order; `next` waits for one (10 s at most). */
class Reports {
  readonly all: Abandoned[] = [];
  #read = 0;
  #waiting: (() => void) | undefined;

  readonly onAbandon = (a: Abandoned): void => {
    this.all.push(a);
    this.#waiting?.();
  };

  async next(): Promise<Abandoned> {
    if (this.#read >= this.all.length) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve, reject) => {
        this.#waiting = resolve;
        timer = setTimeout(() => reject(new Error("no abandonment reported within 10 s")), 10_000);
      }).finally(() => clearTimeout(timer));
      this.#waiting = undefined;
    }
    return this.all[this.#read++]!;
  }
}

const slot = { resource: "db", consume: { conns: 1 }, limits: ["conns:1/concurrent"] };

describe("abandonment through lost answers", () => {
  test("an acquire whose every answer is lost is rolled back by the client: its slot comes back", async () => {
    const lossy = new LossyFetch();
    const reports = new Reports();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch, onAbandon: reports.onAbandon });
    const entity = unique("key");
    const before = lossy.lose(3); // the acquire's three sends
    await assert.rejects(c.acquire({ entity, ...slot }), (e: unknown) => e instanceof ServerUnreachableError && !e.timedOut);
    assert.equal(c.abandoning, 1); // counted before acquire rejects
    const a = await reports.next();
    const key = lossy.keys[before] ?? "";
    assert.match(key, /^tgc-[0-9a-f]{32}$/);
    const id = await idempotentLeaseId(key);
    assert.deepEqual(a, { leaseId: id, entity, resource: "db", outcome: "ended" });
    assert.deepEqual(lossy.paths.slice(before), [...Array(3).fill("POST /v1/acquire"), `POST /v1/leases/${id}/rollback`]);
    assert.equal(c.abandoning, 0);

    // The slot is free (without the rollback, held for the lease's 5-minute TTL).
    const lease = await client.acquire({ entity, ...slot });
    assert.equal(lease.replayed, false);
    await lease.commit();
  });

  test("an acquire with the caller's own key is not abandoned: its retry finds the first grant", async () => {
    const lossy = new LossyFetch();
    const reports = new Reports();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch, onAbandon: reports.onAbandon });
    const entity = unique("key");
    const key = unique("order");
    const before = lossy.lose(3);
    await assert.rejects(c.acquire({ entity, ...slot, idempotencyKey: key }), ServerUnreachableError);
    assert.equal(c.abandoning, 0);
    await assert.rejects(client.acquire({ entity, ...slot }), RateLimitExceeded); // the slot is the key's

    const lease = await c.acquire({ entity, ...slot, idempotencyKey: key });
    assert.equal(lease.replayed, true);
    assert.equal(lease.id, await idempotentLeaseId(key));
    await lease.rollback();
    assert.deepEqual(lossy.paths.slice(before), [...Array(4).fill("POST /v1/acquire"), `POST /v1/leases/${lease.id}/rollback`]);
    assert.deepEqual(reports.all, []);
  });

  test("with idempotency keys off, nothing is abandoned", async () => {
    const lossy = new LossyFetch();
    const reports = new Reports();
    const c = new Client({ baseUrl: server.url, fetch: lossy.fetch, idempotencyKeys: false, onAbandon: reports.onAbandon });
    const entity = unique("key");
    lossy.lose(1);
    await assert.rejects(c.acquire({ entity, ...slot }), ServerUnreachableError);
    assert.equal(c.abandoning, 0);
    await assert.rejects(client.acquire({ entity, ...slot }), RateLimitExceeded); // held for nobody, until its TTL
    assert.deepEqual(reports.all, []);
  });
});

test("the lease id of a key is the server's (Go's model.IdempotentLeaseID)", async () => {
  assert.equal(await idempotentLeaseId("tgc-00000000000000000000000000000000"), "952c5a0b8e25854a3411c2fe44e5e437");
  const key = unique("order");
  const lease = await client.acquire({ entity: unique("key"), ...slot, idempotencyKey: key });
  assert.equal(lease.id, await idempotentLeaseId(key));
  await lease.rollback();
});

/** A canned answer: a status and a JSON body (or `text`, sent as is). */
interface Answer {
  status: number;
  body?: unknown;
  text?: string;
}

const errorBody = (error: string, reason?: string): unknown => ({ error, reason, message: `${error} (canned)` });
const grant = { lease_id: "0123456789abcdef0123456789abcdef", consumed: { conns: 1 }, limits: [] };
const rolledBack = { status: 200, body: { lease_id: "x", consumed: {}, state: "rolled_back" } };
const notFound = { status: 404, body: errorBody("not_found", "lease_not_found") };
const endedAlready = { status: 409, body: { ...(errorBody("conflict", "lease_closed") as object), ended: "expired" } };

/**
 * A fetch that answers acquires with `acquire` (or never, until the call
 * is aborted, with `hang`) and rollbacks with `rollbacks` in turn (the last
 * again and again), each after `gate` resolves; it records the paths.
 */
class Canned {
  acquire: Answer = { status: 200, body: grant };
  hang = false;
  rollbacks: Answer[] = [rolledBack];
  gate: Promise<void> = Promise.resolve();
  readonly paths: string[] = [];
  readonly keys: (string | null)[] = [];

  readonly fetch: typeof fetch = async (input, init) => {
    if (init?.signal?.aborted) {
      throw init.signal.reason; // as fetch does: nothing sent
    }
    const path = new URL(String(input)).pathname;
    this.paths.push(path);
    let a: Answer;
    if (path === "/v1/acquire") {
      this.keys.push(new Headers(init?.headers).get(idempotencyKeyHeader));
      if (this.hang) {
        return new Promise<Response>((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)));
      }
      a = this.acquire;
    } else {
      await this.gate;
      a = (this.rollbacks.length > 1 ? this.rollbacks.shift() : this.rollbacks[0])!;
    }
    return new Response(a.text ?? JSON.stringify(a.body), { status: a.status, headers: { "Content-Type": "application/json" } });
  };

  rollbackCount(): number {
    return this.paths.filter((p) => p.endsWith("/rollback")).length;
  }
}

function cannedClient(canned: Canned, reports: Reports, timeoutMs = 5_000): Client {
  return new Client({ baseUrl: "http://tollgate.test", fetch: canned.fetch, onAbandon: reports.onAbandon, abandonDelaysMs: [1, 1, 1], timeoutMs });
}

describe("which outcomes are abandoned", () => {
  const unknown: [string, Answer][] = [
    ["500 internal", { status: 500, body: errorBody("internal") }],
    ["502 from a gateway", { status: 502, text: "<html>bad gateway</html>" }],
    ["503 unavailable", { status: 503, body: errorBody("unavailable") }],
    ["504 from a gateway", { status: 504, text: "" }],
    ["a 200 not JSON", { status: 200, text: "{not json" }],
    ["a 200 without a lease id", { status: 200, body: { consumed: { conns: 1 } } }],
    ["a degraded grant", { status: 200, body: { ...grant, degraded: true } }],
  ];
  for (const [name, answer] of unknown) {
    test(`abandoned: ${name}`, async () => {
      const canned = new Canned();
      canned.acquire = answer;
      const reports = new Reports();
      const c = cannedClient(canned, reports);
      await c.acquire({ entity: "k", ...slot }).catch(() => undefined);
      assert.equal(c.abandoning, 1);
      const a = await reports.next();
      assert.deepEqual(a, { leaseId: await idempotentLeaseId(canned.keys[0] ?? ""), entity: "k", resource: "db", outcome: "ended" });
      assert.equal(canned.rollbackCount(), 1);
    });
  }

  const refusals: [string, Answer][] = [
    ["400", { status: 400, body: { ...(errorBody("invalid_argument") as object), field: "consume" } }],
    ["401", { status: 401, body: errorBody("unauthenticated") }],
    ["403", { status: 403, body: errorBody("permission_denied") }],
    ["404", { status: 404, body: errorBody("not_found", "namespace_not_found") }],
    ["409", { status: 409, body: errorBody("conflict", "idempotency_key_reused") }],
    ["429", { status: 429, body: { ...(errorBody("rate_limited") as object), retry_after_ms: 1000, limits: [] } }],
    ["a grant", { status: 200, body: grant }],
  ];
  for (const [name, answer] of refusals) {
    test(`not abandoned: ${name}`, async () => {
      const canned = new Canned();
      canned.acquire = answer;
      const reports = new Reports();
      const c = cannedClient(canned, reports);
      await c.acquire({ entity: "k", ...slot }).catch(() => undefined);
      await c.acquireAndCommit({ entity: "k", ...slot }).catch(() => undefined);
      assert.equal(c.abandoning, 0);
      assert.equal(canned.rollbackCount(), 0);
    });
  }

  test("abandoned: acquireAndCommit and wait's attempts answered 503", async () => {
    const canned = new Canned();
    canned.acquire = { status: 503, body: errorBody("unavailable") };
    const reports = new Reports();
    const c = cannedClient(canned, reports);
    await assert.rejects(c.acquireAndCommit({ entity: "k", ...slot }), UnavailableError);
    assert.equal(c.abandoning, 1);
    await assert.rejects(c.wait({ entity: "k", ...slot, waitMs: 1_000 }), UnavailableError);
    assert.equal(c.abandoning + reports.all.length, 2);
    assert.deepEqual([(await reports.next()).outcome, (await reports.next()).outcome], ["ended", "ended"]);
  });

  test("abandoned: the call's timeout, or the caller's signal, with the request in flight", async () => {
    const canned = new Canned();
    canned.hang = true;
    const reports = new Reports();
    const c = cannedClient(canned, reports, 50);
    await assert.rejects(c.acquire({ entity: "k", ...slot }), (e: unknown) => e instanceof ServerUnreachableError && e.timedOut);
    assert.equal(c.abandoning, 1);
    const reason = new Error("caller gave up");
    const ctrl = new AbortController();
    const call = c.acquire({ entity: "k", ...slot, signal: ctrl.signal, timeoutMs: 5_000 });
    setTimeout(() => ctrl.abort(reason), 10);
    await assert.rejects(call, (e: unknown) => e === reason);
    assert.equal(c.abandoning + reports.all.length, 2);
    assert.deepEqual([(await reports.next()).outcome, (await reports.next()).outcome], ["ended", "ended"]);
  });

  test("not abandoned: nothing sent (a bad principal, a signal aborted before)", async () => {
    const canned = new Canned();
    canned.acquire = { status: 503, body: errorBody("unavailable") };
    const reports = new Reports();
    const c = cannedClient(canned, reports);
    await assert.rejects(c.acquire({ entity: "k", ...slot, principal: "a\nb" }));
    await assert.rejects(c.acquire({ entity: "k", ...slot, signal: AbortSignal.abort() }));
    assert.deepEqual(canned.paths, []);
    assert.equal(c.abandoning, 0);
  });
});

describe("the rollbacks of an abandonment", () => {
  const cases: { name: string; rollbacks: Answer[]; outcome: string; sends: number }[] = [
    { name: "a 404 then a rollback: ended", rollbacks: [notFound, rolledBack], outcome: "ended", sends: 2 },
    { name: "ended already (409 lease_closed): ended", rollbacks: [endedAlready], outcome: "ended", sends: 1 },
    { name: "404 every time: not_found", rollbacks: [notFound], outcome: "not_found", sends: 4 },
    { name: "404s then 503: failed", rollbacks: [notFound, notFound, notFound, { status: 503, body: errorBody("unavailable") }], outcome: "failed", sends: 4 },
    { name: "503 then 404: not_found", rollbacks: [{ status: 503, body: errorBody("unavailable") }, notFound], outcome: "not_found", sends: 4 },
  ];
  for (const tc of cases) {
    test(tc.name, async () => {
      const canned = new Canned();
      canned.acquire = { status: 503, body: errorBody("unavailable") };
      canned.rollbacks = [...tc.rollbacks];
      const reports = new Reports();
      const c = cannedClient(canned, reports);
      await assert.rejects(c.acquire({ entity: "k", ...slot }), UnavailableError);
      const a = await reports.next();
      assert.equal(a.outcome, tc.outcome);
      assert.equal(a.error instanceof UnavailableError, tc.outcome === "failed", String(a.error));
      assert.equal(canned.rollbackCount(), tc.sends);
    });
  }

  test(`at most ${maxAbandoning} at once: one more is dropped, nothing sent`, async () => {
    const canned = new Canned();
    canned.acquire = { status: 503, body: errorBody("unavailable") };
    let open!: () => void;
    canned.gate = new Promise((resolve) => (open = resolve));
    const reports = new Reports();
    const c = cannedClient(canned, reports);
    for (let i = 0; i <= maxAbandoning; i++) {
      await assert.rejects(c.acquire({ entity: `k${i}`, ...slot }), UnavailableError);
    }
    assert.equal(c.abandoning, maxAbandoning);
    const dropped = await reports.next();
    const leaseId = await idempotentLeaseId(canned.keys[maxAbandoning] ?? "");
    assert.deepEqual(dropped, { leaseId, entity: `k${maxAbandoning}`, resource: "db", outcome: "dropped" });
    open();
    for (let i = 0; i < maxAbandoning; i++) {
      assert.equal((await reports.next()).outcome, "ended");
    }
    assert.equal(canned.rollbackCount(), maxAbandoning);
    assert.equal(c.abandoning, 0);
  });
});
