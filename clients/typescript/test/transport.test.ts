// Failures of the transport: no server, no answer, answers that are not the
// server's, the caller's signal. Stubs stand in for the server where a real
// one cannot be made to misbehave (a store that does not answer, a proxy).

import assert from "node:assert/strict";
import { type IncomingMessage, type ServerResponse, createServer as createHttpServer } from "node:http";
import { type Socket, createServer as createNetServer } from "node:net";
import { after, describe, test } from "node:test";

import {
  BadResponseError,
  Client,
  ForbiddenError,
  KeyExistsError,
  KeyNotFoundError,
  RateLimitExceeded,
  ServerError,
  ServerUnreachableError,
  TollgateError,
  UnavailableError,
  UnimplementedError,
  ValidationError,
} from "../src/index.js";
import { freePort } from "./server.js";

/** An HTTP server answering every request with handler, on a free port. */
async function stub(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; close: () => Promise<void> }> {
  const srv = createHttpServer(handler);
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const addr = srv.address();
  const port = typeof addr === "object" && addr !== null ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      }),
  };
}

const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of closers) await c();
});

describe("transport", () => {
  test("a closed port is a ServerUnreachableError, a kind of UnavailableError", async () => {
    const port = await freePort();
    const client = new Client({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 2_000 });
    const err = await client.acquire({ entity: "k", resource: "r", consume: { rpm: 1 } }).then(
      () => assert.fail("acquire without a server succeeded"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ServerUnreachableError, String(err));
    assert.ok(err instanceof UnavailableError); // as in the Go client: fail open or closed alike
    assert.ok(err instanceof TollgateError);
    assert.equal(err.timedOut, false);
    assert.equal(err.status, undefined);
    assert.match(err.message, /server unreachable/);
    assert.match(err.message, /ECONNREFUSED/);
    await assert.rejects(client.health(), ServerUnreachableError);
  });

  test("no answer within the timeout is a ServerUnreachableError that timed out", async () => {
    const sockets: Socket[] = [];
    const silent = createNetServer((s) => sockets.push(s)); // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          for (const s of sockets) s.destroy();
          silent.close(() => resolve());
        }),
    );
    const addr = silent.address();
    const port = typeof addr === "object" && addr !== null ? addr.port : 0;
    const client = new Client({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 200 });
    const start = Date.now();
    const err = await client.health().then(
      () => assert.fail("answered"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ServerUnreachableError, String(err));
    assert.equal(err.timedOut, true);
    assert.ok(Date.now() - start < 2_000);
    // A call's own timeout overrides the client's.
    const err2 = await client.health({ timeoutMs: 50 }).then(
      () => assert.fail("answered"),
      (e: unknown) => e,
    );
    assert.ok(err2 instanceof ServerUnreachableError && err2.timedOut);
  });

  test("the caller's signal rejects with its reason", async () => {
    const s = await stub(() => {
      // never answers
    });
    closers.push(s.close);
    const client = new Client({ baseUrl: s.url, timeoutMs: 5_000 });
    const reason = new Error("caller gave up");
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(reason), 50);
    await assert.rejects(client.health({ signal: ctrl.signal }), (e: unknown) => e === reason);
  });

  test("503 from the server is an UnavailableError (the store)", async () => {
    const s = await stub((_req, res) => {
      res.writeHead(503, { "Content-Type": "application/json" });
      res.end('{"error":"unavailable","message":"the store did not answer"}\n');
    });
    closers.push(s.close);
    const client = new Client({ baseUrl: s.url });
    const err = await client.acquire({ entity: "k", resource: "r", consume: { rpm: 1 } }).then(
      () => assert.fail("granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof UnavailableError, String(err));
    assert.equal(err.status, 503);
    assert.equal(err.message, "the store did not answer");
  });

  test("a proxy's answers are inferred from the status", async () => {
    const s = await stub((req, res) => {
      if (req.url?.startsWith("/v1/acquire")) {
        res.writeHead(429, { "Content-Type": "text/html", "Retry-After": "3" });
        res.end("<html>slow down</html>");
        return;
      }
      if (req.url === "/v1/leases/x") {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end("not json");
        return;
      }
      if (req.url === "/v1/big") {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end("x".repeat(2 << 20));
        return;
      }
      if (req.url === "/v1/capacity?resource=r") {
        res.writeHead(501, { "Content-Type": "application/json" });
        res.end('{"error":"unimplemented","message":"this store cannot list buckets","reason":"capacity_unsupported"}');
        return;
      }
      if (req.url === "/readyz") {
        res.writeHead(500, { "Content-Type": "application/json" });
        res.end('{"error":"internal","message":"internal error"}');
        return;
      }
      res.writeHead(502, { "Content-Type": "text/html" });
      res.end("<html>bad gateway</html>");
    });
    closers.push(s.close);
    const client = new Client({ baseUrl: s.url + "/" });
    const rl = await client.acquire({ entity: "k", resource: "r", consume: { rpm: 1 } }).then(
      () => assert.fail("granted"),
      (e: unknown) => e,
    );
    assert.ok(rl instanceof RateLimitExceeded);
    assert.equal(rl.retryAfterMs, 3_000);
    assert.deepEqual(rl.statuses, []);
    await assert.rejects(client.health(), (e: unknown) => e instanceof UnavailableError && e.status === 502);
    await assert.rejects(client.getLease("x"), BadResponseError);
    await assert.rejects(client.capacity("r"), (e: unknown) => e instanceof UnimplementedError && e.reason === "capacity_unsupported");
    await assert.rejects(client.ready(), (e: unknown) => e instanceof ServerError && e.status === 500);
    await assert.rejects(client.send({ method: "GET", path: "/v1/big" }), (e: unknown) => e instanceof BadResponseError && /larger than/.test(e.message));
  });

  test("403 names the field; key reasons are their own classes; a created key needs its secret", async () => {
    const s = await stub((req, res) => {
      res.setHeader("Content-Type", "application/json");
      if (req.url === "/v1/acquire") {
        res.writeHead(403);
        res.end('{"error":"permission_denied","message":"permission denied: entity: no","field":"entity","reason":"no"}');
      } else if (req.url === "/v1/keys/ci") {
        res.writeHead(404);
        res.end('{"error":"not_found","message":"revoke key ci: API key not found","reason":"key_not_found"}');
      } else if (req.url === "/v1/keys" && req.headers["x-tollgate-namespace"] === "taken") {
        res.writeHead(409);
        res.end('{"error":"conflict","message":"create key ci: API key already exists","reason":"key_exists"}');
      } else if (req.url === "/v1/keys") {
        res.writeHead(201);
        res.end('{"name":"ci","namespace":"default","role":"acquire","allow_limits":false,"created_at_ms":1}');
      } else {
        res.writeHead(403);
        res.end('{"error":"permission_denied","message":"permission denied: role read may not do this"}');
      }
    });
    closers.push(s.close);
    const client = new Client({ baseUrl: s.url });
    const err = await client.acquire({ entity: "k", resource: "r", consume: { rpm: 1 } }).then(
      () => assert.fail("granted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ForbiddenError, String(err));
    assert.equal(err.field, "entity");
    assert.equal(err.reason, "no");
    await assert.rejects(client.reset({ entity: "k", resource: "r" }), (e: unknown) => e instanceof ForbiddenError && e.field === "" && e.reason === undefined);
    await assert.rejects(client.revokeKey("ci"), KeyNotFoundError);
    await assert.rejects(new Client({ baseUrl: s.url, namespace: "taken" }).createKey({ name: "ci", role: "acquire" }), KeyExistsError);
    await assert.rejects(client.createKey({ name: "ci", role: "acquire" }), BadResponseError);
  });

  test("the base URL and options are checked", () => {
    for (const bad of ["localhost:8080", "ftp://h", "http://h/?q=1", "http://h/#f", "not a url"]) {
      assert.throws(() => new Client({ baseUrl: bad }), (e: unknown) => e instanceof ValidationError && e.field === "baseUrl", bad);
    }
    assert.throws(() => new Client({ baseUrl: "http://h", timeoutMs: 0 }), ValidationError);
    assert.equal(new Client({ baseUrl: "http://h:1/prefix/" }).baseUrl, "http://h:1/prefix");
  });

  test("requests carry the key, namespace, principal and JSON", async () => {
    let seen: IncomingMessage | undefined;
    let body = "";
    const s = await stub((req, res) => {
      seen = req;
      req.setEncoding("utf8");
      req.on("data", (c: string) => (body += c));
      req.on("end", () => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end('{"lease_id":"00112233445566778899aabbccddeeff","consumed":{"rpm":1},"limits":[],"expires_at_ms":1}\n');
      });
    });
    closers.push(s.close);
    const client = new Client({ baseUrl: `${s.url}/tg`, apiKey: "tg_k", namespace: "team-a", principal: "svc" });
    const lease = await client.acquire({ entity: "k", resource: "openai/gpt-4o", consume: { rpm: 1 }, leaseTtlMs: 1500.2, onUnavailable: "allow" });
    assert.equal(lease.id, "00112233445566778899aabbccddeeff");
    assert.equal(seen?.url, "/tg/v1/acquire");
    assert.equal(seen?.method, "POST");
    assert.equal(seen?.headers["authorization"], "Bearer tg_k");
    assert.equal(seen?.headers["x-tollgate-namespace"], "team-a");
    assert.equal(seen?.headers["x-tollgate-principal"], "svc");
    assert.equal(seen?.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(body), {
      entity: "k",
      resource: "openai/gpt-4o",
      consume: { rpm: 1 },
      lease_ttl_ms: 1501,
      on_unavailable: "allow",
    });

    // A call's own principal replaces the client's for that call only.
    await lease.penalize({ limits: ["rpm"], retryAfterMs: 1_000, principal: "alice" });
    assert.equal(seen?.url, `/tg/v1/leases/${lease.id}/penalize`);
    assert.equal(seen?.headers["x-tollgate-principal"], "alice");
    await client.deleteEntity("e", { principal: "" }); // empty: the client's
    assert.equal(seen?.headers["x-tollgate-principal"], "svc");
  });
});
