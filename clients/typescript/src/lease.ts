// A granted acquire, recorded in the server's store.

import { LeaseClosedError, LeaseEndedError, LeaseNotFoundError, ValidationError, type WireLimitStatus, toStatus } from "./errors.js";
import { type ApiAnswer, type ApiRequest, seg } from "./http.js";
import type { CallOptions, Consume, LeaseInfo, LimitStatus, PenalizeArgs, Penalty } from "./types.js";

/** What a Lease needs of its Client. */
export interface LeaseHost {
  send(req: ApiRequest): Promise<ApiAnswer>;
  penalize(args: PenalizeArgs): Promise<void>;
  /** A lease gave back concurrency or reserved tokens of entity and resource: wake the host's waiters for them. */
  released?(entity: string, resource: string): void;
}

/** The acquire answer a lease is made from. */
export interface WireAcquire {
  lease_id?: string;
  consumed?: Consume;
  limits?: WireLimitStatus[];
  degraded?: boolean;
  expires_at_ms?: number;
}

/** A lease body as the lease routes answer it. */
export interface WireLease {
  lease_id: string;
  consumed?: Consume;
  state: LeaseInfo["state"];
  entity?: string;
  resource?: string;
  expires_at_ms?: number;
}

export function toLeaseInfo(w: WireLease): LeaseInfo {
  const info: LeaseInfo = { leaseId: w.lease_id, consumed: { ...(w.consumed ?? {}) }, state: w.state };
  if (w.entity !== undefined) info.entity = w.entity;
  if (w.resource !== undefined) info.resource = w.resource;
  if (w.expires_at_ms !== undefined) info.expiresAtMs = w.expires_at_ms;
  return info;
}

/** Where a lease handle stands: open, ended through it, or lost (the server no longer has it). */
export type LeaseState = "open" | "committed" | "rolled_back" | "lost";

/**
 * A granted acquire. Adjust it when the real cost is known, extend it if the
 * work outlasts its TTL, then end it with `commit` or `rollback`; a lease
 * never ended expires after its TTL and the server's reconciler commits it
 * as it stands.
 *
 * Once it has ended, `adjust`, `extend`, `commit`, `rollback` and
 * `penalize` throw LeaseClosedError without calling the server. A lease
 * that has ended otherwise (through another handle or server, or by the
 * reconciler at its expiry) throws LeaseEndedError, a LeaseClosedError
 * saying how, and one the server no longer has LeaseClosedError; either
 * way the handle is then `lost`.
 *
 * Every call but `adjust` (which adds up) is sent again when its answer is
 * lost: a commit sent again is answered as the first, and a rollback that
 * finds the lease rolled back already is done.
 *
 * `await using lease = await client.acquire(...)` rolls the lease back when
 * the block exits if it is still open: disposal cannot tell success from
 * failure, so commit explicitly at the end of the block, or use
 * `client.withLease`, which commits when its function resolves and rolls
 * back when it throws.
 */
export class Lease implements AsyncDisposable {
  /** The lease's id, by which any server over the same store serves it. */
  readonly id: string;
  readonly entity: string;
  readonly resource: string;
  /** Granted without the server's store (mode `"allow"` while it was down): nothing was counted, and the lease never expires. */
  readonly degraded: boolean;
  /**
   * The acquire's answer was the grant of an earlier call with the same
   * idempotency key (a retry after a lost answer), handed out again: that
   * call debited nothing, and `statuses` is empty.
   */
  readonly replayed: boolean;

  readonly #host: LeaseHost;
  #state: LeaseState = "open";
  #consumed: Consume;
  #statuses: LimitStatus[];
  #expiresAtMs: number | undefined;

  /** @internal Made by Client.acquire and Client.resumeLease. */
  constructor(host: LeaseHost, entity: string, resource: string, w: WireAcquire, replayed = false) {
    this.#host = host;
    this.id = w.lease_id ?? "";
    this.entity = entity;
    this.resource = resource;
    this.degraded = w.degraded === true;
    this.replayed = replayed;
    this.#consumed = { ...(w.consumed ?? {}) };
    this.#statuses = (w.limits ?? []).map(toStatus);
    this.#expiresAtMs = w.expires_at_ms;
  }

  /** `open` until it ends through this handle (`committed`, `rolled_back`) or the server reports it gone (`lost`). */
  get state(): LeaseState {
    return this.#state;
  }

  /** Whether the lease can still be adjusted, extended and ended through this handle. */
  get open(): boolean {
    return this.#state === "open";
  }

  /** When the lease expires (Unix ms), as the server last reported it; undefined for a degraded lease and once ended. */
  get expiresAtMs(): number | undefined {
    return this.#state === "open" ? this.#expiresAtMs : undefined;
  }

  /**
   * What the lease has consumed so far per limit (what was asked, once
   * however many cascade levels it debited; each level's debit is in
   * `statuses`), as the server last reported it: after acquire and adjust, the final
   * figure after commit, `{}` after rollback.
   */
  get consumed(): Consume {
    return { ...this.#consumed };
  }

  /** Every limit the acquire debited, with balances just after the grant; empty for a degraded lease. */
  get statuses(): LimitStatus[] {
    return this.#statuses.map((s) => ({ ...s }));
  }

  /**
   * Records a change to the lease's consumption, e.g. the difference between
   * the estimate and the real cost; negative amounts give back (a lease gives
   * back at most what it took). The buckets see it at commit. An unknown or
   * concurrency limit, or a net consumption below zero, is a ValidationError
   * naming `consume.NAME`, and nothing is recorded.
   */
  async adjust(delta: Consume, opts: CallOptions = {}): Promise<LeaseInfo> {
    const info = await this.#call("adjust", { consume: delta }, opts);
    this.#update(info);
    return info;
  }

  /**
   * Moves the lease's expiry to `ttlMs` from now (1000 to 86400000), for
   * work that outlasts the TTL: call it well before `expiresAtMs`, at half
   * the TTL say. It does not revive an expired lease (LeaseClosedError).
   */
  async extend(ttlMs: number, opts: CallOptions = {}): Promise<LeaseInfo> {
    if (!(ttlMs > 0) || !Number.isFinite(ttlMs)) {
      throw new ValidationError(`invalid ttl_ms ${ttlMs}: must be positive`, "ttl_ms", String(ttlMs));
    }
    const info = await this.#call("extend", { ttl_ms: Math.ceil(ttlMs) }, opts);
    this.#update(info);
    return info;
  }

  /**
   * Writes the lease's adjustments to its buckets and returns its concurrency
   * tokens. It is sent again when its answer is lost; a commit of a lease
   * that was committed (by a send whose answer was lost, or through another
   * handle) succeeds, answered as the first. If the server's store fails
   * (UnavailableError) or the server cannot be reached
   * (ServerUnreachableError), the lease stays open and commit (or rollback)
   * can be called again. A lease that ended otherwise throws
   * LeaseEndedError.
   */
  async commit(opts: CallOptions = {}): Promise<LeaseInfo> {
    return this.#end("commit", "committed", opts);
  }

  /**
   * Gives back everything the lease consumed and discards its adjustments.
   * A lease found rolled back already (by a send whose answer was lost, or
   * through another handle) is done. Failures as for commit.
   */
  async rollback(opts: CallOptions = {}): Promise<LeaseInfo> {
    return this.#end("rollback", "rolled_back", opts);
  }

  /**
   * Empties limits of the lease's entity and resource until a time, as
   * `client.penalize` does (the limits are looked up among those the lease
   * was acquired with): what to do when the vendor called under the lease
   * answers 429. The lease stays open; `principal`, if given, is recorded
   * in the audit event instead of the client's. A degraded lease penalizes
   * through `client.penalize`.
   */
  async penalize(p: Penalty): Promise<void> {
    if (this.degraded) {
      return this.#host.penalize({ ...p, entity: this.entity, resource: this.resource });
    }
    await this.#call("penalize", penaltyBody(p), p);
  }

  /** The lease as its record in the store stands (GET /v1/leases/{id}). */
  async info(opts: CallOptions = {}): Promise<LeaseInfo> {
    this.#checkOpen();
    const info = toLeaseInfo((await this.#request({ method: "GET", path: this.#path(""), signal: opts.signal, timeoutMs: opts.timeoutMs })) as WireLease);
    this.#update(info);
    return info;
  }

  /**
   * Rolls the lease back if it is still open; does nothing otherwise. A
   * lease the server no longer has is not an error here. This is what
   * `await using` calls.
   */
  async dispose(): Promise<void> {
    if (this.#state !== "open") {
      return;
    }
    try {
      await this.rollback();
    } catch (err) {
      if (!(err instanceof LeaseNotFoundError)) {
        throw err;
      }
    }
  }

  /** See `dispose`. Defined where the runtime has `Symbol.asyncDispose` (Node 18.18+, 20.4+). */
  declare [Symbol.asyncDispose]: () => Promise<void>;

  async #end(action: "commit" | "rollback", state: LeaseState, opts: CallOptions): Promise<LeaseInfo> {
    // Whether the ending gives back slots a waiter of the client may want.
    const slots = this.#state === "open" && this.#statuses.some((s) => (s.kind === "concurrency" || s.kind === "reserved") && s.requested > 0);
    let info: LeaseInfo;
    try {
      info = await this.#call(action, undefined, opts);
    } catch (err) {
      if (!(action === "rollback" && err instanceof LeaseEndedError && err.ended === "rolled_back")) {
        throw err;
      }
      // Rolled back already: what the caller asked for.
      info = { leaseId: this.id, consumed: {}, state: "rolled_back", entity: this.entity, resource: this.resource };
    }
    this.#state = state;
    this.#consumed = { ...info.consumed };
    this.#expiresAtMs = undefined;
    if (slots) {
      this.#host.released?.(this.entity, this.resource);
    }
    return info;
  }

  #update(info: LeaseInfo): void {
    if (this.#state !== "open") {
      return;
    }
    this.#consumed = { ...info.consumed };
    if (info.expiresAtMs !== undefined) {
      this.#expiresAtMs = info.expiresAtMs;
    }
  }

  #checkOpen(): void {
    if (this.#state !== "open") {
      throw new LeaseClosedError(`lease ${this.id}: lease closed (${this.#state})`, { reason: "lease_closed" });
    }
  }

  #path(action: string): string {
    return `/v1/leases/${seg(this.id)}${action ? `/${action}` : ""}`;
  }

  async #call(action: string, body: unknown, opts: CallOptions): Promise<LeaseInfo> {
    this.#checkOpen();
    const req: ApiRequest = {
      method: "POST",
      path: this.#path(action),
      body,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
      principal: opts.principal,
      retry: action !== "adjust",
    };
    const data = await this.#request(req);
    return data === undefined ? { leaseId: this.id, consumed: this.consumed, state: "open" } : toLeaseInfo(data as WireLease);
  }

  /** Sends a lease request; an answer that the lease is gone closes the handle. */
  async #request(req: ApiRequest): Promise<unknown> {
    try {
      return (await this.#host.send(req)).data;
    } catch (err) {
      if (err instanceof LeaseNotFoundError) {
        this.#state = "lost";
        this.#expiresAtMs = undefined;
        if (!(err instanceof LeaseClosedError)) {
          throw new LeaseClosedError(`lease ${this.id}: lease closed: ${err.message}`, {
            status: err.status,
            code: err.code,
            reason: err.reason,
            op: err.op,
            cause: err,
          });
        }
      }
      throw err;
    }
  }
}

if (typeof Symbol.asyncDispose === "symbol") {
  Object.defineProperty(Lease.prototype, Symbol.asyncDispose, {
    value: Lease.prototype.dispose,
    writable: true,
    configurable: true,
  });
}

/** The wire body of a penalty. */
export function penaltyBody(p: Penalty): Record<string, unknown> {
  const body: Record<string, unknown> = { limits: p.limits };
  if (p.untilMs !== undefined) body["until_ms"] = Math.ceil(p.untilMs);
  if (p.retryAfterMs !== undefined) body["retry_after_ms"] = Math.ceil(p.retryAfterMs);
  if (p.reason !== undefined) body["reason"] = p.reason;
  return body;
}
