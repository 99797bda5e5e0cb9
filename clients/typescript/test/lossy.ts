// A fetch that loses answers after the server acted, shared by the tests
// of retries (idempotency.test.ts) and of abandonment (abandon.test.ts).

import { idempotencyKeyHeader } from "../src/index.js";

/**
 * A fetch that loses answers: with `lose(n)`, each of the next n requests
 * reaches the server, whose whole answer is read and dropped, and the call
 * fails as undici's does when the connection breaks. It records what it
 * sent: `sent` (how many requests), `keys` (each one's Idempotency-Key)
 * and `paths` (each one's method and path).
 */
export class LossyFetch {
  sent = 0;
  keys: (string | null)[] = [];
  paths: string[] = [];
  #lose = 0;

  readonly fetch: typeof fetch = async (input, init) => {
    this.sent++;
    this.keys.push(new Headers(init?.headers).get(idempotencyKeyHeader));
    this.paths.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
    const resp = await fetch(input, init);
    if (this.#lose > 0) {
      this.#lose--;
      await resp.arrayBuffer(); // the server acted; its answer is lost
      throw new TypeError("fetch failed", { cause: new Error("other side closed") });
    }
    return resp;
  };

  /** Loses the answers of the next n requests; returns how many were sent so far, to count a call's sends from. */
  lose(n = 1): number {
    this.#lose = n;
    return this.sent;
  }
}
