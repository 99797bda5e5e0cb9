// Acquires of unknown outcome (docs/semantics.md 8), as the Go client's
// client/abandon.go, and the library's limiter for the acquires it makes
// without a key.
//
// An acquire the server may have granted without its caller learning it
// (the server answered 5xx: its store did not answer; a 2xx answer the
// client could not read; no whole answer came back after the client's
// retries; the caller's signal or the call's timeout ended it with the
// request in flight; a grant answered degraded, whose store call failed)
// may hold a concurrency slot, or tokens, for a lease nobody holds, until
// a reconciler ends it at its expiry. When the client made its idempotency
// key up itself, nobody will send it again: the client knows the lease's
// id (`idempotentLeaseId` of the key), and rolls the lease back in the
// background, at once and again after each of `abandonDelaysMs` while the
// server answers that there is no such lease (the write may land late) or
// does not answer. A key the caller gave is left alone: the caller may
// send it again, and must find the first grant.

import { hex, webCrypto } from "./crypto.js";
import { LeaseClosedError, LeaseNotFoundError, ServerUnreachableError, TollgateError } from "./errors.js";
import { type ApiAnswer, type ApiRequest, seg } from "./http.js";

/** The waits before each rollback after the first (sent at once), in ms: 1, 5 and 30 s after the acquire failed. */
export const abandonDelaysMs: readonly number[] = Object.freeze([1_000, 4_000, 25_000]);

/** Bounds each rollback when the client has no timeout (`timeoutMs: Infinity`). */
const abandonTimeoutMs = 10_000;

/** The most acquires a client abandons at once; those beyond are reported `"dropped"`, and left to the server's reconciler. */
export const maxAbandoning = 64;

/**
 * How an abandonment ended: `"ended"`, the server rolled the lease back or
 * said it had ended; `"not_found"`, every rollback found no such lease (the
 * acquire was not granted, or landed after the last: a reconciler ends
 * it); `"failed"`, the last rollback got no answer, or an error;
 * `"dropped"`, not rolled back, as `maxAbandoning` were under way.
 */
export type AbandonOutcome = "ended" | "not_found" | "failed" | "dropped";

/** An acquire of unknown outcome the client abandoned, as `onAbandon` reports it. */
export interface Abandoned {
  /** The lease id the acquire's idempotency key names. */
  leaseId: string;
  entity: string;
  resource: string;
  outcome: AbandonOutcome;
  /** The last rollback's error, with `"failed"`. */
  error?: unknown;
}

/**
 * The lease id of an acquire made with an idempotency key, as the server
 * derives it (Go: model.IdempotentLeaseID): the first 128 bits of the
 * SHA-256 of `"tollgate idempotency key\0" + key`, in lowercase hex. It
 * needs Web Crypto's SHA-256, which a browser has only in a secure context.
 */
export async function idempotentLeaseId(key: string): Promise<string> {
  const c = await webCrypto();
  if (c.subtle === undefined) {
    throw new Error("no SHA-256 here (Web Crypto's subtle): a browser page has it only in a secure context (https://)");
  }
  const sum = await c.subtle.digest("SHA-256", new TextEncoder().encode(`tollgate idempotency key\u0000${key}`));
  return hex(new Uint8Array(sum, 0, 16));
}

/**
 * Whether an acquire that was sent and threw err may have been granted
 * unseen: a 5xx answer, a 2xx answer the client could not read, no answer
 * (ServerUnreachableError, after its retries or at its timeout), or the
 * caller's signal aborting it in flight. Not a refusal (any 4xx), nor an
 * error raised before anything was sent.
 */
export function unknownOutcome(err: unknown, signal: AbortSignal | undefined): boolean {
  if (err instanceof TollgateError) {
    const status = err.status ?? 0;
    if (status !== 0) {
      return status >= 500 || (status >= 200 && status <= 299);
    }
    return err instanceof ServerUnreachableError;
  }
  return signal?.aborted === true && err === signal.reason;
}

/** What an Abandoner needs of its client. */
export interface AbandonerOptions {
  /** Sends one request, as the client does (its headers, its retries). */
  send: (req: ApiRequest) => Promise<ApiAnswer>;
  /** The client's timeout, which bounds each rollback (Infinity: 10 s). */
  timeoutMs: number;
  onAbandon?: ((a: Abandoned) => void) | undefined;
  delaysMs?: readonly number[] | undefined;
}

/** Rolls back, in the background, the leases of a client's acquires of unknown outcome. */
export class Abandoner {
  #inFlight = 0;
  readonly #send: (req: ApiRequest) => Promise<ApiAnswer>;
  readonly #timeoutMs: number;
  readonly #onAbandon: ((a: Abandoned) => void) | undefined;
  readonly #delaysMs: readonly number[];

  constructor(o: AbandonerOptions) {
    this.#send = o.send;
    this.#timeoutMs = Number.isFinite(o.timeoutMs) ? o.timeoutMs : abandonTimeoutMs;
    this.#onAbandon = o.onAbandon;
    this.#delaysMs = o.delaysMs ?? abandonDelaysMs;
  }

  /** How many abandonments are under way. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Rolls back the lease of an acquire of entity and resource sent with
   * key, whose outcome is unknown: counted at once, done in the background
   * (a promise nobody awaits, which never rejects).
   */
  abandon(key: string, entity: string, resource: string): void {
    if (this.#inFlight >= maxAbandoning) {
      void this.#run(key, entity, resource, false);
      return;
    }
    this.#inFlight++;
    void this.#run(key, entity, resource, true);
  }

  async #run(key: string, entity: string, resource: string, roll: boolean): Promise<void> {
    const ab: Abandoned = { leaseId: "", entity, resource, outcome: "dropped" };
    try {
      ab.leaseId = await idempotentLeaseId(key);
      if (roll) {
        let r = await this.#rollBack(ab.leaseId);
        for (const ms of this.#delaysMs) {
          if (r.outcome === "ended") {
            break;
          }
          await pause(ms);
          r = await this.#rollBack(ab.leaseId);
        }
        ab.outcome = r.outcome;
        if (r.error !== undefined) {
          ab.error = r.error;
        }
      }
    } catch (err) {
      ab.outcome = "failed"; // no lease id: no SHA-256 here
      ab.error = err;
    }
    if (roll) {
      this.#inFlight--; // over once reported: a callback that counts sees it gone
    }
    try {
      const p: unknown = this.#onAbandon?.(ab);
      if (p instanceof Promise) {
        p.catch(() => undefined); // the callback's own failure is not the client's
      }
    } catch {
      // as above
    }
  }

  /** Sends the rollback of lease id once (with the client's retries of a lost answer). */
  async #rollBack(id: string): Promise<{ outcome: AbandonOutcome; error?: unknown }> {
    try {
      await this.#send({ method: "POST", path: `/v1/leases/${seg(id)}/rollback`, retry: true, timeoutMs: this.#timeoutMs });
      return { outcome: "ended" };
    } catch (err) {
      if (err instanceof LeaseClosedError) {
        return { outcome: "ended" }; // ended already, one way or another
      }
      if (err instanceof LeaseNotFoundError) {
        return { outcome: "not_found" };
      }
      return { outcome: "failed", error: err };
    }
  }
}

/** Sleeps ms on a timer that does not keep the process alive (Node's unref), so that an abandonment never delays an exit. */
function pause(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer: unknown = setTimeout(resolve, ms);
    (timer as { unref?: () => void }).unref?.();
  });
}
