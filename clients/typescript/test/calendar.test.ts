// Calendar quotas (NAME:N/UNIT@ZONE) against a real tollgate serve: stored
// in their text form, every status of a quota carries resetsAtMs (grants,
// leases, available, 429 bodies), and a refusal waits exactly to the
// boundary. The server runs on the wall clock, so the test computes the
// boundary itself and allows for the few seconds a call may take.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, RateLimitExceeded, ValidationError } from "../src/index.js";
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

/** How far the server's clock and ours may be apart around one call (ms). */
const slackMs = 5_000;

/** The start of the month after now's, UTC, in Unix ms (Date.UTC carries December into January). */
function nextMonthUTC(): number {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
}

/** The next UTC midnight, in Unix ms. */
function nextDayUTC(): number {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
}

/**
 * Runs call and returns its result with the boundary `next` gives, taken
 * before and after the call and equal (no window ended meanwhile; tried
 * again if one did), so the test holds at midnight too.
 */
async function atBoundary<T>(next: () => number, call: () => Promise<T>): Promise<[T, number]> {
  for (let i = 0; i < 2; i++) {
    const before = next();
    const out = await call();
    if (next() === before) return [out, before];
  }
  throw new Error("a window ended twice during one call");
}

describe("calendar quotas", () => {
  test("a monthly quota resets at next month's start and refuses until it", async () => {
    const entity = unique("key");
    const resource = unique("llm");
    const stored = await client.setLimits({ resource }, { limits: ["tok:1000/month@UTC", "rpm:100"] });
    assert.ok(stored.limits.includes("tok:1000/month@UTC"), `stored ${stored.limits}`);

    const [grant, next] = await atBoundary(nextMonthUTC, () => client.acquireAndCommit({ entity, resource, consume: { tok: 900, rpm: 1 } }));
    const tok = grant.statuses.find((s) => s.limit === "tok");
    assert.equal(tok?.available, 100);
    assert.equal(tok?.resetsAtMs, next);
    // Not a quota: no reset time.
    assert.equal(grant.statuses.find((s) => s.limit === "rpm")?.resetsAtMs, undefined);
    // The window each is granted over: a month of 28 to 31 days, a minute.
    assert.ok([28, 29, 30, 31].map((d) => d * 86_400_000).includes(tok?.windowMs ?? 0), `tok window ${tok?.windowMs}`);
    assert.equal(grant.statuses.find((s) => s.limit === "rpm")?.windowMs, 60_000);

    const [sts, next2] = await atBoundary(nextMonthUTC, () => client.available({ entity, resource }));
    assert.equal(sts.find((s) => s.limit === "tok")?.resetsAtMs, next2);

    // 200 more cannot be covered before the month ends: the refusal waits
    // exactly to the boundary, on the server's wall clock.
    const [denied, next3] = await atBoundary(nextMonthUTC, async () => {
      try {
        await client.acquire({ entity, resource, consume: { tok: 200 } });
      } catch (e) {
        return { e, nowMs: Date.now() };
      }
      assert.fail("200 tokens granted past the quota");
    });
    const e = denied.e;
    assert.ok(e instanceof RateLimitExceeded, String(e));
    assert.ok(e.retryAfterMs > 0);
    const toBoundary = next3 - denied.nowMs;
    assert.ok(Math.abs(e.retryAfterMs - toBoundary) <= slackMs, `retryAfterMs ${e.retryAfterMs}, to the month's end ${toBoundary}`);
    assert.deepEqual(e.exceeded.map((s) => s.limit), ["tok"]);
    assert.equal(e.exceeded[0]?.resetsAtMs, next3);
    assert.equal(e.exceeded[0]?.retryAfterMs, e.retryAfterMs);
  });

  test("a per-call day quota in a lease", async () => {
    const entity = unique("key");
    const resource = unique("llm");
    const [lease, next] = await atBoundary(nextDayUTC, () =>
      client.acquire({ entity, resource, consume: { d: 1 }, limits: ["d:3/day@UTC"] }),
    );
    const st = lease.statuses[0];
    assert.equal(st?.source, "call");
    assert.equal(st?.available, 2);
    assert.equal(st?.resetsAtMs, next);
    await lease.commit();
  });

  test("an unknown zone is a validation error naming it", async () => {
    await assert.rejects(client.setLimits({ resource: unique("llm") }, { limits: ["tok:1000/month@Mars/Base"] }), (e: unknown) => {
      assert.ok(e instanceof ValidationError);
      assert.match(e.message, /Mars\/Base/);
      return true;
    });
  });
});
