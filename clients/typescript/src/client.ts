// The client of one Tollgate server (tollgate serve), over its HTTP/JSON
// API (docs/http-api.md), with the operations and errors of the Go client
// (package client).

import { version } from "./version.js";
import { type Abandoned, Abandoner, unknownOutcome } from "./abandon.js";
import { hex, webCrypto } from "./crypto.js";
import { BadResponseError, clampMs, LeaseClosedError, LeaseNotFoundError, RateLimitExceeded, ReservationNotFoundError, SlotLostError, ValidationError, type WireLimitStatus, toStatus } from "./errors.js";
import { type ApiAnswer, type ApiRequest, type Transport, principalHeader, principalValue, seg, send } from "./http.js";
import { Lease, type LeaseHost, type WireAcquire, type WireLease, penaltyBody, toLeaseInfo } from "./lease.js";
import type {
  AcquireArgs,
  AuditEvent,
  AuditPage,
  CallOptions,
  Consume,
  CreateKeyArgs,
  CreatedKey,
  Entity,
  EntityPage,
  EntityPatch,
  Grant,
  KeyInfo,
  KeyPage,
  KeyRole,
  LeaseInfo,
  LeasePage,
  LimitStatus,
  LimitsConfig,
  LimitsPage,
  Namespace,
  OpenLease,
  PenalizeArgs,
  Reservation,
  ReservationPage,
  ReserveArgs,
  Reserved,
  ResetArgs,
  ResourceCapacity,
  DeniedEntity,
  Scope,
  ScopedLimits,
  Usage,
  UsagePage,
  UsageQuery,
  UsageSummary,
  VersionOptions,
  WaitArgs,
} from "./types.js";

/** Bounds each call unless `timeoutMs` says otherwise. */
export const defaultTimeoutMs = 10_000;
/** How long `purgeNamespace` waits by default: the server gives a purge up to 10 minutes. */
export const purgeTimeoutMs = 10 * 60_000;
/** Sent as User-Agent unless `userAgent` says otherwise (browsers ignore it). */
export const defaultUserAgent = `tollgate-ts-client/${version}`;

/** The shortest TTL `slot` extends a lease by (the server's least lease TTL), as the Go client's. */
export const minSlotTtlMs = 1_000;
/** Selects the namespace of a call. */
export const namespaceHeader = "X-Tollgate-Namespace";
export { principalHeader };

const namespacePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** What `new Client` takes. */
export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8080`; a path, if any, prefixes every endpoint. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` with every request. */
  apiKey?: string | undefined;
  /** Every call works in this namespace (`X-Tollgate-Namespace`); without it, `default` or the API key's. */
  namespace?: string | undefined;
  /**
   * Recorded as the author of changes in audit events when the server has
   * no API keys (`X-Tollgate-Principal`, sent as UTF-8). A call's own
   * `principal` (CallOptions) replaces it for that call.
   */
  principal?: string | undefined;
  userAgent?: string | undefined;
  /** Bounds each call, reading the answer included (default 10000). `Infinity` leaves only the caller's signal. */
  timeoutMs?: number | undefined;
  /** The fetch to call (default: the global one), e.g. to add tracing. */
  fetch?: typeof fetch | undefined;
  /**
   * `false` stops the client sending an idempotency key of its own with each
   * acquire (one given as `idempotencyKey` is still sent). Without a key an
   * acquire sent again may be granted twice, so the client then sends none
   * again after a lost answer. Default `true`.
   */
  idempotencyKeys?: boolean | undefined;
  /**
   * Called once for every acquire of unknown outcome the client abandons,
   * when its rollbacks end: to log them, or, in tests, to know when they
   * end. An acquire (`acquire`, `acquireAndCommit`, each attempt of `wait`)
   * whose key the client made up, and which ended in a 5xx answer, a 2xx
   * answer it could not read, no answer (after its retries, or its timeout
   * or `signal` with the request in flight), or a degraded grant, may hold
   * a slot or tokens for nobody: the client rolls the lease back in the
   * background by the lease id the key names, at once and again 1, 5 and
   * 30 s after while the server finds no such lease or does not answer
   * (see README, "Acquires of unknown outcome"). Its errors are ignored.
   */
  onAbandon?: ((abandoned: Abandoned) => void) | undefined;
  /** @internal The waits between an abandonment's rollbacks, in ms (default 1000, 4000, 25000): for tests. */
  abandonDelaysMs?: readonly number[] | undefined;
}

/** The header of an acquire's idempotency key. */
export const idempotencyKeyHeader = "Idempotency-Key";
/** The answer's header (`true`) when an acquire replays the grant of an earlier call with the same key. */
export const replayedHeader = "Idempotent-Replayed";

const maxIdempotencyKeyLength = 255;

/** Checks a caller's idempotency key: what the server takes, and no space at either end (HTTP drops those: the server would see another key, or none). */
function checkIdempotencyKey(key: string): string {
  if (typeof key !== "string" || key.length === 0 || key.length > maxIdempotencyKeyLength || !/^[\x20-\x7e]*$/.test(key)) {
    throw new ValidationError(
      `invalid idempotency_key: want 1 to ${maxIdempotencyKeyLength} printable ASCII characters`,
      "idempotency_key",
      String(key).slice(0, 80),
    );
  }
  if (key !== key.trim()) {
    throw new ValidationError("invalid idempotency_key: no space at the start or the end", "idempotency_key", key.slice(0, 80));
  }
  return key;
}

/** A key for one logical acquire: `tgc-` and 128 random bits in hex, as the Go client's. */
async function newIdempotencyKey(): Promise<string> {
  const b = new Uint8Array(16);
  (await webCrypto()).getRandomValues(b);
  return `tgc-${hex(b)}`;
}

/** The longest delay setTimeout keeps: a longer one fires at once. */
const maxTimerMs = 2 ** 31 - 1;

/**
 * Sleeps ms, however long (in steps setTimeout keeps), or rejects with the
 * signal's reason when it aborts.
 */
async function sleep(ms: number, signal: AbortSignal | undefined, woken?: Waker): Promise<void> {
  for (let left = ms; left > 0 && !woken?.woken; left -= maxTimerMs) {
    await sleepStep(Math.min(left, maxTimerMs), signal, woken);
  }
  if (signal?.aborted) {
    throw signal.reason;
  }
}

function sleepStep(ms: number, signal: AbortSignal | undefined, woken: Waker | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
    woken?.onWake(done);
  });
}

/** A waiter's wake-up: set once, by a release of its slot. */
class Waker {
  woken = false;
  #fn: (() => void) | undefined;

  wake(): void {
    this.woken = true;
    const fn = this.#fn;
    this.#fn = undefined;
    fn?.();
  }

  /** Calls fn once woken (at once if it was). */
  onWake(fn: () => void): void {
    if (this.woken) {
      fn();
    } else {
      this.#fn = fn;
    }
  }
}

/** The wakers of a client's waits, by entity and resource: only keys with a waiter are held. */
class Waiters {
  readonly #m = new Map<string, Set<Waker>>();

  add(key: string, w: Waker): void {
    let set = this.#m.get(key);
    if (set === undefined) {
      set = new Set();
      this.#m.set(key, set);
    }
    set.add(w);
  }

  remove(key: string, w: Waker): void {
    const set = this.#m.get(key);
    if (set?.delete(w) && set.size === 0) {
      this.#m.delete(key);
    }
  }

  wake(key: string): void {
    for (const w of this.#m.get(key) ?? []) {
      w.wake();
    }
  }
}

function slotKey(entity: string, resource: string): string {
  return JSON.stringify([entity, resource]);
}

/** Whether a granted acquire's answer names its lease. */
function hasLeaseId(w: WireAcquire | undefined): w is WireAcquire & { lease_id: string } {
  return typeof w === "object" && w !== null && typeof w.lease_id === "string" && w.lease_id !== "";
}

function badShape(op: string, what: string): BadResponseError {
  return new BadResponseError(`${op}: malformed answer: ${what}`, { op });
}

/** Rethrows a 404 of the reservation routes as what it is: no such reservation (the server's reason is lease_not_found). */
function asReservationError(err: unknown): never {
  if (err instanceof LeaseNotFoundError) {
    throw new ReservationNotFoundError(err.message, { status: err.status, code: err.code, reason: err.reason, op: err.op, cause: err });
  }
  throw err;
}

function call(opts: CallOptions): Pick<ApiRequest, "signal" | "timeoutMs" | "principal"> {
  return { signal: opts.signal, timeoutMs: opts.timeoutMs, principal: opts.principal };
}

/** `call` of a change made on a version: with its `If-Match` or `If-None-Match` (a ValidationError for a bad one, before any call). */
function versioned(opts: VersionOptions): Pick<ApiRequest, "signal" | "timeoutMs" | "principal" | "headers"> {
  const out: Pick<ApiRequest, "signal" | "timeoutMs" | "principal" | "headers"> = call(opts);
  if (opts.ifMatch !== undefined && opts.ifAbsent) {
    throw new ValidationError("give ifMatch or ifAbsent, not both", "ifMatch", String(opts.ifMatch));
  }
  if (opts.ifAbsent) {
    out.headers = { "If-None-Match": "*" };
  } else if (opts.ifMatch !== undefined) {
    if (typeof opts.ifMatch !== "number" || !Number.isSafeInteger(opts.ifMatch) || opts.ifMatch < 1) {
      throw new ValidationError("invalid ifMatch: want a version (an integer, 1 or more)", "ifMatch", String(opts.ifMatch));
    }
    out.headers = { "If-Match": `"${opts.ifMatch}"` };
  }
  return out;
}

interface WireEntity {
  id: string;
  name?: string;
  parent_id?: string;
  cascade?: boolean;
  metadata?: Record<string, string>;
  created_at_ms?: number;
  version?: number;
}

function toEntity(w: WireEntity): Entity {
  const e: Entity = { id: w.id };
  if (w.name !== undefined) e.name = w.name;
  if (w.parent_id !== undefined) e.parentId = w.parent_id;
  if (w.cascade !== undefined) e.cascade = w.cascade;
  if (w.metadata !== undefined) e.metadata = { ...w.metadata };
  if (w.created_at_ms !== undefined) e.createdAtMs = w.created_at_ms;
  if (w.version !== undefined) e.version = w.version;
  return e;
}

interface WireReservation {
  id: string;
  entity: string;
  resource: string;
  holder?: string;
  created_at_ms?: number;
  expires_at_ms?: number;
}

function toReservation(w: WireReservation): Reservation {
  const r: Reservation = { id: w.id, entity: w.entity, resource: w.resource };
  if (w.holder !== undefined) r.holder = w.holder;
  if (w.created_at_ms !== undefined) r.createdAtMs = w.created_at_ms;
  if (w.expires_at_ms !== undefined) r.expiresAtMs = w.expires_at_ms;
  return r;
}

interface WireOpenLease {
  lease_id: string;
  entity: string;
  resource: string;
  holder?: string;
  created_at_ms?: number;
  expires_at_ms?: number;
  consumed?: Consume;
}

function toOpenLease(w: WireOpenLease): OpenLease {
  const l: OpenLease = { leaseId: w.lease_id, entity: w.entity, resource: w.resource, consumed: { ...(w.consumed ?? {}) } };
  if (w.holder !== undefined) l.holder = w.holder;
  if (w.created_at_ms !== undefined) l.createdAtMs = w.created_at_ms;
  if (w.expires_at_ms !== undefined) l.expiresAtMs = w.expires_at_ms;
  return l;
}

interface WireNamespace {
  name: string;
  id: string;
  created_at_ms?: number;
  deleted_at_ms?: number;
}

function toNamespace(w: WireNamespace): Namespace {
  const n: Namespace = { name: w.name, id: w.id };
  if (w.created_at_ms !== undefined) n.createdAtMs = w.created_at_ms;
  if (w.deleted_at_ms !== undefined) n.deletedAtMs = w.deleted_at_ms;
  return n;
}

interface WireKey {
  name: string;
  namespace: string;
  role: KeyRole;
  entity?: string;
  allow_limits?: boolean;
  created_at_ms: number;
  expires_at_ms?: number;
}

function toKeyInfo(w: WireKey): KeyInfo {
  const k: KeyInfo = { name: w.name, namespace: w.namespace, role: w.role, allowLimits: w.allow_limits === true, createdAtMs: w.created_at_ms };
  if (w.entity) k.entity = w.entity;
  if (w.expires_at_ms) k.expiresAtMs = w.expires_at_ms;
  return k;
}

const keyRoles: readonly string[] = ["acquire", "read", "admin"];

/** The request path and query of the limits stored at scope. */
function scopePath(s: Scope): { path: string; query?: URLSearchParams } {
  if (s.entity) {
    const path = `/v1/limits/entities/${seg(s.entity)}`;
    if (s.resource && s.resource !== "_default_") {
      return { path, query: new URLSearchParams({ resource: s.resource }) };
    }
    return { path };
  }
  if (s.resource) {
    return { path: `/v1/limits/resources/${seg(s.resource)}` };
  }
  return { path: "/v1/limits/system" };
}

/**
 * The client of one Tollgate server. It holds no connection state of its
 * own (fetch pools connections) and is safe to share.
 *
 * Every call is bounded by `timeoutMs` (the client's, or the call's own) and
 * by the caller's `signal`, and throws a TollgateError subclass: see
 * errors.ts.
 */
export class Client implements LeaseHost {
  readonly baseUrl: string;
  readonly namespace: string | undefined;
  readonly #t: Transport;
  readonly #keys: boolean;
  readonly #waiters = new Waiters();
  readonly #abandoner: Abandoner;

  constructor(opts: ClientOptions) {
    this.baseUrl = Client.#parseBase(opts.baseUrl);
    const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
    if (!(timeoutMs > 0)) {
      throw new ValidationError(`invalid timeoutMs ${timeoutMs}: must be positive`, "timeoutMs", String(timeoutMs));
    }
    if (opts.namespace !== undefined && (!namespacePattern.test(opts.namespace) || opts.namespace.length > 64)) {
      throw new ValidationError(`invalid namespace "${opts.namespace}": want ${namespacePattern.source}, at most 64 bytes`, "namespace", opts.namespace);
    }
    this.namespace = opts.namespace;
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": opts.userAgent ?? defaultUserAgent };
    if (opts.apiKey) headers["Authorization"] = `Bearer ${opts.apiKey}`;
    if (opts.namespace) headers[namespaceHeader] = opts.namespace;
    if (opts.principal) headers[principalHeader] = principalValue(opts.principal);
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new ValidationError("no fetch: this runtime has no global fetch (Node 18+ has); pass options.fetch", "fetch", "");
    }
    this.#t = { baseUrl: this.baseUrl, headers, timeoutMs, fetch: f };
    this.#keys = opts.idempotencyKeys !== false;
    this.#abandoner = new Abandoner({ send: (req) => send(this.#t, req), timeoutMs, onAbandon: opts.onAbandon, delaysMs: opts.abandonDelaysMs });
  }

  /** @internal How many acquires of unknown outcome the client is abandoning now (for tests). */
  get abandoning(): number {
    return this.#abandoner.inFlight;
  }

  static #parseBase(raw: string): string {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new ValidationError(`invalid baseUrl "${raw}": not a URL`, "baseUrl", raw);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new ValidationError(`invalid baseUrl "${raw}": want an http:// or https:// URL`, "baseUrl", raw);
    }
    if (u.search !== "" || u.hash !== "" || raw.includes("?") || raw.includes("#")) {
      throw new ValidationError(`invalid baseUrl "${raw}": no query or fragment allowed`, "baseUrl", raw);
    }
    return u.origin + u.pathname.replace(/\/+$/, "");
  }

  /** @internal Sends one request (Lease uses it). */
  send(req: ApiRequest): Promise<ApiAnswer> {
    return send(this.#t, req);
  }

  async #data<T>(req: ApiRequest): Promise<T> {
    return (await send(this.#t, req)).data as T;
  }

  // --- acquire ---------------------------------------------------------

  #acquireBody(a: AcquireArgs, commit: boolean): Record<string, unknown> {
    const body: Record<string, unknown> = { entity: a.entity, resource: a.resource, consume: a.consume };
    if (a.limits !== undefined) body["limits"] = a.limits;
    if (commit) body["commit"] = true;
    if (!commit && a.leaseTtlMs !== undefined) body["lease_ttl_ms"] = Math.ceil(a.leaseTtlMs);
    if (a.onUnavailable !== undefined) body["on_unavailable"] = a.onUnavailable;
    return body;
  }

  /**
   * POSTs an acquire with its idempotency key (the caller's, or the
   * client's own): the answer, and whether it replays an earlier grant of
   * the key. One of the client's own keys whose outcome is unknown is
   * abandoned (abandon.ts) before this rejects or returns.
   */
  async #acquire(args: AcquireArgs, commit: boolean): Promise<{ w: WireAcquire | undefined; replayed: boolean }> {
    let key = args.idempotencyKey;
    let own = false;
    if (key !== undefined) {
      checkIdempotencyKey(key);
    } else if (this.#keys) {
      key = await newIdempotencyKey();
      own = true;
    }
    const sent = args.signal?.aborted !== true; // a call whose signal has aborted sends nothing
    let a: ApiAnswer;
    try {
      a = await this.send({
        method: "POST",
        path: "/v1/acquire",
        body: this.#acquireBody(args, commit),
        headers: key === undefined ? undefined : { [idempotencyKeyHeader]: key },
        retry: key !== undefined,
        ...call(args),
      });
    } catch (err) {
      if (own && sent && unknownOutcome(err, args.signal)) {
        this.#abandoner.abandon(key!, args.entity, args.resource); // granted unseen, maybe
      }
      throw err;
    }
    const w = a.data as WireAcquire | undefined;
    if (own && (w?.degraded === true || (!commit && !hasLeaseId(w)))) {
      // A degraded grant's store call failed (its write may have landed);
      // a grant without a lease id is one the client cannot read.
      this.#abandoner.abandon(key!, args.entity, args.resource);
    }
    return { w, replayed: a.headers.get(replayedHeader) === "true" };
  }

  /**
   * Checks and debits `consume` against every limit in effect for the entity
   * and resource, and their cascade ancestors, all or nothing. The lease
   * must be ended with `commit` or `rollback` (or `await using`, or use
   * `withLease`); otherwise the server's reconciler commits it when its TTL
   * ends.
   *
   * The client sends an idempotency key with each acquire (its own, unless
   * `idempotencyKey` gives one; see `idempotencyKeys`), and sends the
   * acquire again when its answer is lost: the server grants once, and the
   * lease of an answer that replays the first grant reports `replayed`.
   *
   * A denial is a RateLimitExceeded (nothing was consumed); bad input a
   * ValidationError naming the field (`consume.rpm`); the store down an
   * UnavailableError (with `onUnavailable: "block"`); no answer a
   * ServerUnreachableError; the key used with another request an
   * IdempotencyConflictError; the lease the key was granted ended since a
   * LeaseEndedError.
   */
  async acquire(args: AcquireArgs): Promise<Lease> {
    const op = "POST /v1/acquire";
    const { w, replayed } = await this.#acquire(args, false);
    if (!hasLeaseId(w)) {
      throw badShape(op, "granted acquire without a lease id");
    }
    return new Lease(this, args.entity, args.resource, w, replayed);
  }

  /**
   * Acquires and commits in one call, for work whose cost is known up front;
   * no lease is kept. The same `idempotencyKey` again within 10 minutes
   * answers this grant again (`replayed`, no statuses) and debits once.
   * Errors as for `acquire`.
   */
  async acquireAndCommit(args: AcquireArgs): Promise<Grant> {
    const { w, replayed } = await this.#acquire(args, true);
    return { consumed: { ...(w?.consumed ?? {}) }, statuses: (w?.limits ?? []).map(toStatus), degraded: w?.degraded === true, replayed };
  }

  /**
   * Acquires like `acquire`, but when denied sleeps as the denial's
   * `backoff()` says and tries again: a rate limit's `retryAfterMs`,
   * exactly; for a concurrency or reserved limit, which a holder may give
   * back at any time, about a second (`slotPollMs`), or the earliest expiry
   * among its holders if sooner, so a waiter costs about one call a
   * second. It goes on until granted, until `waitMs` has passed (it rejects
   * with the last RateLimitExceeded at once when refill could not grant it
   * in time, rather than sleep in vain; a wait for a slot tries once more
   * at `waitMs`), or until `signal` aborts (it rejects with the signal's
   * reason). Other errors are thrown as they come. Each attempt is bounded
   * by the call timeout on its own. A lease of this client that gives back
   * the slot waited for (its commit or rollback) wakes the wait at once.
   */
  async wait(args: WaitArgs): Promise<Lease> {
    const deadline = args.waitMs === undefined ? Infinity : Date.now() + args.waitMs;
    const key = slotKey(args.entity, args.resource);
    for (;;) {
      // Taken before the acquire, so that a release during it counts.
      const woken = new Waker();
      this.#waiters.add(key, woken);
      try {
        return await this.acquire(args);
      } catch (err) {
        if (!(err instanceof RateLimitExceeded)) {
          throw err;
        }
        const { sleepMs, leastMs } = err.backoff();
        const left = deadline - Date.now();
        if (left <= 0 || leastMs > left) {
          throw err;
        }
        // A slot: a lease of this client giving it back wakes the wait.
        await sleep(Math.min(sleepMs, left), args.signal, err.waits !== undefined ? woken : undefined);
      } finally {
        this.#waiters.remove(key, woken);
      }
    }
  }

  /** @internal A lease of this client gave back slots of entity and resource (LeaseHost). */
  released(entity: string, resource: string): void {
    this.#waiters.wake(slotKey(entity, resource));
  }

  /**
   * Acquires (waiting up to `waitMs` if given, as `wait` does; else trying
   * once), runs `fn` with the lease, and ends it: commit when `fn` resolves,
   * rollback when it throws (the error is rethrown). If `fn` ended the lease
   * itself, nothing more is done. If the commit fails, the lease is rolled
   * back rather than left holding concurrency tokens until its TTL, and the
   * commit's error is thrown. The lease is ended without the caller's
   * signal, which may have aborted meanwhile.
   */
  async withLease<T>(args: WaitArgs, fn: (lease: Lease) => Promise<T> | T): Promise<T> {
    const lease = args.waitMs === undefined ? await this.acquire(args) : await this.wait(args);
    let result: T;
    try {
      result = await fn(lease);
    } catch (err) {
      if (lease.open) {
        // The lease left unended expires and is committed by the reconciler;
        // the caller's error matters more than the rollback's.
        await lease.rollback().catch(() => undefined);
      }
      throw err;
    }
    await commitOrRollback(lease);
    return result;
  }

  /**
   * Holds a slot while `fn` runs, keeping its lease alive, as Go's
   * `WithSlot`: acquires (waiting up to `waitMs` if given, as `wait` does;
   * else trying once), runs `fn`, and ends the lease as `withLease` does
   * (commit when `fn` resolves, rollback when it throws). While `fn` runs,
   * the lease is extended by its TTL every half TTL, so that work longer
   * than the TTL keeps its slot, and a crashed process's slot still comes
   * back within one TTL. The TTL is `leaseTtlMs` or, without it, the one the
   * server granted, measured on this machine's clock at the grant; at least
   * `minSlotTtlMs`. An extension that fails otherwise (the network, the
   * store) is tried again at the next half.
   *
   * If an extension finds the lease gone, the `signal` given to `fn` aborts
   * with a SlotLostError (pass it on to the work's own calls), and `slot`
   * rejects with that SlotLostError however `fn` then ends (an abort makes
   * most calls throw an AbortError, which would hide why). The caller's
   * `signal`, if any, aborts `fn`'s too.
   */
  async slot<T>(args: WaitArgs, fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T): Promise<T> {
    const lease = args.waitMs === undefined ? await this.acquire(args) : await this.wait(args);
    const work = new AbortController();
    const stop = new AbortController();
    const onCallerAbort = () => work.abort(args.signal?.reason);
    args.signal?.addEventListener("abort", onCallerAbort, { once: true });
    let lost: SlotLostError | undefined;
    let ttl = 0;
    if (!lease.degraded && lease.expiresAtMs !== undefined) {
      ttl = Math.max(args.leaseTtlMs ?? lease.expiresAtMs - Date.now(), minSlotTtlMs);
    }
    const keeper = (async () => {
      while (ttl > 0) {
        try {
          await sleep(ttl / 2, stop.signal);
        } catch {
          return; // the work is over
        }
        try {
          await lease.extend(ttl, { signal: stop.signal });
        } catch (err) {
          if (stop.signal.aborted) return;
          if (err instanceof LeaseClosedError) {
            if (lease.state === "committed" || lease.state === "rolled_back") return; // fn ended it
            lost = new SlotLostError(`lease ${lease.id}: slot lost while its work ran: ${(err as Error).message}`, {
              status: err.status,
              code: err.code,
              reason: err.reason,
              op: err.op,
              cause: err,
            });
            work.abort(lost);
            return;
          }
          // Tried again at the next half.
        }
      }
    })();
    const halt = async () => {
      stop.abort();
      await keeper;
      args.signal?.removeEventListener("abort", onCallerAbort);
    };
    let result: T;
    try {
      result = await fn(lease, work.signal);
    } catch (err) {
      await halt();
      if (lease.open) {
        await lease.rollback().catch(() => undefined);
      }
      throw lost ?? err;
    }
    await halt();
    if (lost !== undefined) {
      throw lost;
    }
    await commitOrRollback(lease);
    return result;
  }

  /**
   * The current state of every limit in effect for the entity and resource
   * and their cascade ancestors, after refill; it writes nothing.
   */
  async available(args: { entity: string; resource: string; limits?: string[] | undefined } & CallOptions): Promise<LimitStatus[]> {
    const query = new URLSearchParams({ entity: args.entity, resource: args.resource });
    for (const l of args.limits ?? []) query.append("limits", l);
    const w = await this.#data<{ limits?: WireLimitStatus[] }>({ method: "GET", path: "/v1/available", query, ...call(args) });
    return (w?.limits ?? []).map(toStatus);
  }

  /**
   * How long, in milliseconds, before `acquire` with the same arguments
   * could succeed (0 if it could now), however long (saturated at 2^63-1
   * ms); for concurrency and reserved limits, when to look again. Writes
   * nothing. As the Go library's TimeUntilAvailable.
   */
  async timeUntilAvailable(
    args: { entity: string; resource: string; consume: Consume; limits?: string[] | undefined } & CallOptions,
  ): Promise<number> {
    const names = Object.keys(args.consume);
    if (names.length === 0) throw new ValidationError("invalid consume: must name at least one limit", "consume", "");
    const query = new URLSearchParams({ entity: args.entity, resource: args.resource });
    for (const l of args.limits ?? []) query.append("limits", l);
    for (const name of names) query.append("consume", `${name}:${args.consume[name]}`);
    const w = await this.#data<{ retry_after_ms?: number }>({ method: "GET", path: "/v1/available", query, ...call(args) });
    if (typeof w?.retry_after_ms !== "number") throw badShape("GET /v1/available", "no retry_after_ms (a server older than this client)");
    return clampMs(w.retry_after_ms);
  }

  /**
   * A lease by id, as its record stands (any server over the store serves
   * it): its info, not a handle (for one, `resumeLease`). One that has
   * ended is a LeaseEndedError saying how; one never granted here, or
   * forgotten, a LeaseNotFoundError.
   */
  async getLease(id: string, opts: CallOptions = {}): Promise<LeaseInfo> {
    return toLeaseInfo(await this.#data<WireLease>({ method: "GET", path: `/v1/leases/${seg(id)}`, ...call(opts) }));
  }

  /**
   * A handle on an open lease by its id, e.g. one another process acquired:
   * any server over the same store serves it (as the Go client's
   * ResumeLease). Adjust, extend, commit or roll it back as one `acquire`
   * returned; its `statuses` are empty (the server keeps only what the
   * lease consumed). One that has ended is a LeaseEndedError saying how;
   * one never granted here, or forgotten, a LeaseNotFoundError.
   */
  async resumeLease(id: string, opts: CallOptions = {}): Promise<Lease> {
    const op = "GET /v1/leases/{id}";
    const w = await this.#data<WireLease>({ method: "GET", path: `/v1/leases/${seg(id)}`, ...call(opts) });
    if (typeof w !== "object" || w === null || typeof w.lease_id !== "string" || w.lease_id === "") {
      throw badShape(op, "lease without a lease id");
    }
    if (w.state !== "open") {
      throw badShape(op, `lease in state ${String(w.state)}, not open`);
    }
    const a: WireAcquire = { lease_id: w.lease_id, consumed: w.consumed ?? {} };
    if (w.expires_at_ms !== undefined) a.expires_at_ms = w.expires_at_ms;
    return new Lease(this, w.entity ?? "", w.resource ?? "", a);
  }

  // --- reservations and penalties --------------------------------------

  /**
   * Reserves resource id `id` for the entity and resource: one token of
   * each reserved limit named in `consume` (or of every reserved limit in
   * effect), with any other limits of `consume`, all or nothing. The same id
   * held by the same entity and resource is the same reservation (`isNew`
   * false, nothing debited again); held by another, a
   * ReservationConflictError. A full reserved limit is a RateLimitExceeded.
   */
  async reserve(args: ReserveArgs): Promise<Reserved> {
    const body: Record<string, unknown> = { entity: args.entity, resource: args.resource, id: args.id };
    if (args.consume !== undefined) body["consume"] = args.consume;
    if (args.limits !== undefined) body["limits"] = args.limits;
    if (args.ttlMs !== undefined) body["ttl_ms"] = Math.ceil(args.ttlMs);
    if (args.onUnavailable !== undefined) body["on_unavailable"] = args.onUnavailable;
    const a = await this.send({ method: "POST", path: "/v1/reservations", body, ...call(args) });
    const w = a.data as (WireReservation & { consumed?: Consume; limits?: WireLimitStatus[]; degraded?: boolean }) | undefined;
    if (typeof w !== "object" || w === null || typeof w.id !== "string") {
      throw badShape("POST /v1/reservations", "no reservation");
    }
    return {
      ...toReservation(w),
      isNew: a.status === 201,
      consumed: { ...(w.consumed ?? {}) },
      statuses: (w.limits ?? []).map(toStatus),
      degraded: w.degraded === true,
    };
  }

  /**
   * Releases the reservation of resource id `id`, whoever holds it: its
   * reserved tokens come back. One that does not exist (never made, already
   * released, expired) is a ReservationNotFoundError (a LeaseNotFoundError),
   * which a caller releasing on an event that may come twice can treat as
   * done.
   */
  async release(id: string, opts: CallOptions = {}): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/reservations/${seg(id)}`, ...call(opts) }).catch(asReservationError);
  }

  /** The reservation of resource id `id`, or a ReservationNotFoundError. */
  async getReservation(id: string, opts: CallOptions = {}): Promise<Reservation> {
    return toReservation(
      await this.#data<WireReservation>({ method: "GET", path: `/v1/reservations/${seg(id)}`, ...call(opts) }).catch(asReservationError),
    );
  }

  /**
   * One page of the namespace's open durable leases (every lease the server
   * hands out is durable), of one entity and then of one of its resources
   * when given, sorted by id. Reservations are listed by `listReservations`.
   */
  async listLeases(
    args: { entity?: string | undefined; resource?: string | undefined; after?: string | undefined; limit?: number | undefined } & CallOptions = {},
  ): Promise<LeasePage> {
    const query = new URLSearchParams();
    if (args.entity) query.set("entity", args.entity);
    if (args.resource) query.set("resource", args.resource);
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    const w = await this.#data<{ leases?: WireOpenLease[]; next?: string }>({ method: "GET", path: "/v1/leases", query, ...call(args) });
    const page: LeasePage = { leases: (w?.leases ?? []).map(toOpenLease) };
    if (w?.next) page.next = w.next;
    return page;
  }

  /** An entity's reservations (of one resource if given), sorted by id, a page (`limit`, 1 to 1000, default 100) at a time. */
  async listReservations(
    args: { entity: string; resource?: string | undefined; after?: string | undefined; limit?: number | undefined } & CallOptions,
  ): Promise<ReservationPage> {
    const query = new URLSearchParams({ entity: args.entity });
    if (args.resource) query.set("resource", args.resource);
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    const w = await this.#data<{ reservations?: WireReservation[]; next?: string }>({ method: "GET", path: "/v1/reservations", query, ...call(args) });
    const page: ReservationPage = { reservations: (w?.reservations ?? []).map(toReservation) };
    if (w?.next) page.next = w.next;
    return page;
  }

  /**
   * Empties the named rate limits of an entity and resource until `untilMs`
   * (or for `retryAfterMs`), for everyone sharing the server's store: what
   * to do when a vendor answers 429 with its own retry-after. Acquires
   * before then are denied with a `retryAfterMs` of at least the time left.
   */
  async penalize(args: PenalizeArgs): Promise<void> {
    const body = { entity: args.entity, resource: args.resource, ...penaltyBody(args) };
    await this.send({ method: "POST", path: "/v1/penalize", body, ...call(args) });
  }

  /**
   * Refills rate limits of an entity's bucket for a resource to capacity,
   * for everyone sharing the server's store: it lifts a penalty and
   * forgives debt and consumption. `limits` names those to refill (absent:
   * every refilling limit the bucket holds); a concurrency or reserved
   * limit, or one the bucket does not hold, is a ValidationError (field
   * `limits`). Only the entity's own bucket is refilled, not its cascade
   * ancestors'. Recorded in the audit log (`limit.reset`) with `reason`.
   * With API keys: an admin key's call (one confined to an entity resets
   * its entities only: else a ForbiddenError with field `entity`).
   */
  async reset(args: ResetArgs): Promise<void> {
    const body: Record<string, unknown> = { entity: args.entity, resource: args.resource };
    if (args.limits !== undefined) {
      if (!Array.isArray(args.limits) || args.limits.length === 0) {
        throw new ValidationError("invalid limits: name at least one limit, or leave limits out for every refilling one", "limits", String(args.limits));
      }
      body["limits"] = args.limits;
    }
    if (args.reason) body["reason"] = args.reason;
    await this.send({ method: "POST", path: "/v1/reset", body, ...call(args) });
  }

  // --- API keys kept in the store (an admin key of the namespace) ---------

  /**
   * Creates an API key of the client's namespace, kept in the store (its
   * hash only) and honoured by every server over it. The answer holds the
   * secret in `key`: it is shown this once. `entity` confines the key to
   * that entity and its descendants; `allowLimits` lets it send its own
   * limits (and `onUnavailable: "allow"` where the stored mode is block),
   * which admin keys may anyway; `expiresInMs` (rounded up to whole
   * seconds) makes it stop working after that long. A KeyExistsError if the
   * namespace has a key of that name.
   */
  async createKey(args: CreateKeyArgs): Promise<CreatedKey> {
    const op = "POST /v1/keys";
    if (typeof args.name !== "string" || args.name === "") {
      throw new ValidationError("invalid name: the key's name must be a non-empty string", "name", String(args.name));
    }
    if (!keyRoles.includes(args.role)) {
      throw new ValidationError(`invalid role "${args.role}": want acquire, read or admin`, "role", String(args.role));
    }
    const body: Record<string, unknown> = { name: args.name, role: args.role };
    if (args.entity !== undefined) {
      if (typeof args.entity !== "string" || args.entity === "") {
        throw new ValidationError("invalid entity: want an entity id, or leave entity out for every entity", "entity", String(args.entity));
      }
      body["entity"] = args.entity;
    }
    if (args.allowLimits) body["allow_limits"] = true;
    if (args.expiresInMs !== undefined) {
      if (!(args.expiresInMs > 0) || !Number.isFinite(args.expiresInMs)) {
        throw new ValidationError(
          `invalid expiresInMs ${args.expiresInMs}: must be positive, or left out for a key that works until revoked`,
          "expires_in_s",
          String(args.expiresInMs),
        );
      }
      body["expires_in_s"] = Math.ceil(args.expiresInMs / 1000);
    }
    const w = await this.#data<WireKey & { key?: unknown }>({ method: "POST", path: "/v1/keys", body, ...call(args) });
    if (typeof w !== "object" || w === null || typeof w.key !== "string" || w.key === "") {
      throw badShape(op, "created key without its secret (key)");
    }
    return { ...toKeyInfo(w), key: w.key };
  }

  /**
   * The stored API keys of the namespace, sorted by name, without secrets
   * or hashes, a page (`limit`, 1 to 1000, default 100) at a time: pass
   * `next` as `after` for the following page. Keys of the server's keys
   * file are not listed.
   */
  async listKeys(args: { after?: string | undefined; limit?: number | undefined } & CallOptions = {}): Promise<KeyPage> {
    const query = new URLSearchParams();
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    const w = await this.#data<{ keys?: WireKey[]; next?: string }>({ method: "GET", path: "/v1/keys", query, ...call(args) });
    const page: KeyPage = { keys: (w?.keys ?? []).map(toKeyInfo) };
    if (w?.next) page.next = w.next;
    return page;
  }

  /**
   * Deletes the stored API key `name`: the server refuses it at once (an
   * UnauthorizedError), every other server over the store within its
   * refresh interval. A KeyNotFoundError if there is no such key.
   */
  async revokeKey(name: string, opts: CallOptions = {}): Promise<void> {
    if (typeof name !== "string" || name === "") throw new ValidationError("invalid name: the key's name must be a non-empty string", "name", String(name));
    await this.send({ method: "DELETE", path: `/v1/keys/${seg(name)}`, ...call(opts) });
  }

  // --- entities ----------------------------------------------------------

  /** Creates an entity; an EntityExistsError if the id is taken, EntityNotFoundError if the parent does not exist. */
  async createEntity(e: Entity, opts: CallOptions = {}): Promise<Entity> {
    const body: WireEntity = { id: e.id };
    if (e.name !== undefined) body.name = e.name;
    if (e.parentId !== undefined) body.parent_id = e.parentId;
    if (e.cascade !== undefined) body.cascade = e.cascade;
    if (e.metadata !== undefined) body.metadata = e.metadata;
    return toEntity(await this.#data<WireEntity>({ method: "POST", path: "/v1/entities", body, ...call(opts) }));
  }

  /** The entity, or an EntityNotFoundError. */
  async getEntity(id: string, opts: CallOptions = {}): Promise<Entity> {
    return toEntity(await this.#data<WireEntity>({ method: "GET", path: `/v1/entities/${seg(id)}`, ...call(opts) }));
  }

  /**
   * Removes the entity, its stored limits and its buckets; its children
   * keep their parent id. With `ifMatch` (the `version` read), a
   * PreconditionFailedError if it is no longer at that version.
   */
  async deleteEntity(id: string, opts: VersionOptions = {}): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/entities/${seg(id)}`, ...versioned(opts) });
  }

  /**
   * The namespace's entities, sorted by id, a page (`limit`, 1 to 1000,
   * default 100) at a time: pass `next` as `after` for the following page.
   * On DynamoDB an entity created a moment ago may be missing.
   */
  async listEntities(args: { after?: string | undefined; limit?: number | undefined } & CallOptions = {}): Promise<EntityPage> {
    const query = new URLSearchParams();
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    const w = await this.#data<{ entities?: WireEntity[]; next?: string }>({ method: "GET", path: "/v1/entities", query, ...call(args) });
    const page: EntityPage = { entities: (w?.entities ?? []).map(toEntity) };
    if (w?.next) page.next = w.next;
    return page;
  }

  /**
   * Changes an entity (PATCH): only the fields of `patch` that are present
   * are sent, the others keep their stored values (see EntityPatch).
   * Answers the entity as stored. An EntityNotFoundError if the entity or
   * the new parent does not exist; a ValidationError with field
   * `parent_id` if the new parent is the entity or one of its descendants.
   * The server applies the patch to the entity as stored, so two updates
   * at once each keep the field the other changed; with `ifMatch` (the
   * `version` read) the entity must still be at that version, else a
   * PreconditionFailedError and nothing changes.
   */
  async updateEntity(id: string, patch: EntityPatch, opts: VersionOptions = {}): Promise<Entity> {
    if (typeof id !== "string" || id === "") throw new ValidationError("invalid id: the entity id must be a non-empty string", "id", String(id));
    const body: Record<string, unknown> = {};
    if (patch.name !== undefined) body["name"] = patch.name;
    if (patch.parentId !== undefined) body["parent_id"] = patch.parentId;
    if (patch.cascade !== undefined) body["cascade"] = patch.cascade;
    if (patch.metadata !== undefined) body["metadata"] = patch.metadata;
    return toEntity(await this.#data<WireEntity>({ method: "PATCH", path: `/v1/entities/${seg(id)}`, body, ...versioned(opts) }));
  }

  /** The entities whose parent is `id`, sorted by id. */
  async children(id: string, opts: CallOptions = {}): Promise<Entity[]> {
    const w = await this.#data<{ entities?: WireEntity[] }>({ method: "GET", path: `/v1/entities/${seg(id)}/children`, ...call(opts) });
    return (w?.entities ?? []).map(toEntity);
  }

  // --- limits ------------------------------------------------------------

  /**
   * Replaces the limits stored at `scope` (`{}` is the system); answers
   * them in canonical form, with their `version`. `ifMatch` (the `version`
   * read) stores them only if the stored ones are still at that version,
   * `ifAbsent` only if none are stored; else a PreconditionFailedError.
   */
  async setLimits(scope: Scope, config: LimitsConfig, opts: VersionOptions = {}): Promise<LimitsConfig> {
    const body: Record<string, unknown> = { limits: config.limits };
    if (config.shadow !== undefined && config.shadow.length > 0) body["shadow"] = config.shadow;
    if (config.alertAt !== undefined && config.alertAt.length > 0) body["alert_at"] = config.alertAt;
    if (config.onUnavailable !== undefined) body["on_unavailable"] = config.onUnavailable;
    return Client.#toConfig(await this.#data({ method: "PUT", ...scopePath(scope), body, ...versioned(opts) }));
  }

  /** The limits stored at `scope` (that level only; nothing is inherited), or a NotFoundError. */
  async getLimits(scope: Scope, opts: CallOptions = {}): Promise<LimitsConfig> {
    return Client.#toConfig(await this.#data({ method: "GET", ...scopePath(scope), ...call(opts) }));
  }

  /**
   * Removes the limits stored at `scope`, or throws a NotFoundError when
   * there were none (with `ifMatch`, a PreconditionFailedError when they
   * are no longer at that version).
   */
  async deleteLimits(scope: Scope, opts: VersionOptions = {}): Promise<void> {
    await this.send({ method: "DELETE", ...scopePath(scope), ...versioned(opts) });
  }

  /**
   * Every configuration stored in the namespace, a page (`limit`, 1 to
   * 1000, default 100) at a time, in order: the system's, the resources' by
   * resource, the entities' by entity and resource (`"_default_"` for an
   * entity's default). Pass `next` (an opaque cursor) as `after` for the
   * following page. On DynamoDB a configuration written a moment ago may
   * be missing.
   */
  async listLimits(args: { after?: string | undefined; limit?: number | undefined } & CallOptions = {}): Promise<LimitsPage> {
    const query = new URLSearchParams();
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    const w = await this.#data<{ configs?: { entity?: string; resource?: string }[]; next?: string }>({
      method: "GET",
      path: "/v1/limits",
      query,
      ...call(args),
    });
    const configs = (w?.configs ?? []).map((c) => {
      const out: ScopedLimits = Client.#toConfig(c);
      if (c.entity) out.entity = c.entity;
      if (c.resource) out.resource = c.resource;
      return out;
    });
    const page: LimitsPage = { configs };
    if (w?.next) page.next = w.next;
    return page;
  }

  static #toConfig(w: unknown): LimitsConfig {
    const c = w as { limits?: string[]; shadow?: string[]; alert_at?: number[]; on_unavailable?: "block" | "allow"; version?: number } | undefined;
    const out: LimitsConfig = { limits: [...(c?.limits ?? [])] };
    if (c?.on_unavailable) out.onUnavailable = c.on_unavailable;
    if (c?.shadow && c.shadow.length > 0) out.shadow = [...c.shadow];
    if (c?.alert_at && c.alert_at.length > 0) out.alertAt = [...c.alert_at];
    if (c?.version !== undefined) out.version = c.version;
    return out;
  }

  /** Audit events of changes to entities and limits, oldest first: of `entity`, or (without it) of system and resource limits. */
  async auditEvents(args: { entity?: string | undefined; after?: string | undefined; limit?: number | undefined } & CallOptions = {}): Promise<AuditPage> {
    const query = new URLSearchParams();
    if (args.entity) query.set("entity", args.entity);
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    return this.#auditPage("/v1/audit", query, args);
  }

  /**
   * The namespace's whole audit log (every entity's events and the system's) in time order, from `sinceMs`
   * (inclusive) to `untilMs` (exclusive), Unix milliseconds: pass `next` as `after` for the following page.
   * An admin key's call (`GET /v1/audit/log`).
   */
  async auditLog(
    args: { sinceMs?: number | undefined; untilMs?: number | undefined; after?: string | undefined; limit?: number | undefined } & CallOptions = {},
  ): Promise<AuditPage> {
    const query = new URLSearchParams();
    if (args.sinceMs !== undefined) query.set("since", String(Math.floor(args.sinceMs)));
    if (args.untilMs !== undefined) query.set("until", String(Math.floor(args.untilMs)));
    if (args.after) query.set("after", args.after);
    if (args.limit !== undefined) query.set("limit", String(args.limit));
    return this.#auditPage("/v1/audit/log", query, args);
  }

  async #auditPage(path: string, query: URLSearchParams, args: CallOptions): Promise<AuditPage> {
    const w = await this.#data<{
      events?: { id: string; time_ms: number; action: string; entity?: string; resource?: string; principal?: string; details?: Record<string, string> }[];
      next?: string;
    }>({ method: "GET", path, query, ...call(args) });
    const events = (w?.events ?? []).map((e) => {
      const ev: AuditEvent = { id: e.id, timeMs: e.time_ms, action: e.action };
      if (e.entity !== undefined) ev.entity = e.entity;
      if (e.resource !== undefined) ev.resource = e.resource;
      if (e.principal !== undefined) ev.principal = e.principal;
      if (e.details !== undefined) ev.details = { ...e.details };
      return ev;
    });
    const page: AuditPage = { events };
    if (w?.next) page.next = w.next;
    return page;
  }

  // --- usage -------------------------------------------------------------

  static #usageQuery(q: UsageQuery): URLSearchParams {
    const v = new URLSearchParams();
    if (q.entity) v.set("entity", q.entity);
    if (q.resource) v.set("resource", q.resource);
    if (q.window) v.set("window", q.window);
    if (q.fromMs !== undefined) v.set("from", String(q.fromMs));
    if (q.toMs !== undefined) v.set("to", String(q.toMs));
    if (q.after) v.set("after", q.after);
    if (q.limit !== undefined) v.set("limit", String(q.limit));
    return v;
  }

  /** Usage snapshots (per entity, resource and hour or day). */
  async usage(q: UsageQuery): Promise<UsagePage> {
    const w = await this.#data<{
      usage?: { entity: string; resource: string; window: "hour" | "day"; start_ms: number; consumed?: Consume; events: number }[];
      next?: string;
    }>({ method: "GET", path: "/v1/usage", query: Client.#usageQuery(q), ...call(q) });
    const usage: Usage[] = (w?.usage ?? []).map((u) => ({
      entity: u.entity,
      resource: u.resource,
      window: u.window,
      startMs: u.start_ms,
      consumed: { ...(u.consumed ?? {}) },
      events: u.events,
    }));
    const page: UsagePage = { usage };
    if (w?.next) page.next = w.next;
    return page;
  }

  /** Usage totals over a range. */
  async usageSummary(q: UsageQuery): Promise<UsageSummary> {
    const w = await this.#data<{
      windows: number;
      events: number;
      limits?: Record<string, { total: number; average_per_window: number; peak: number; peak_start_ms: number }>;
    }>({ method: "GET", path: "/v1/usage/summary", query: Client.#usageQuery(q), ...call(q) });
    const limits: UsageSummary["limits"] = {};
    for (const [name, l] of Object.entries(w?.limits ?? {})) {
      limits[name] = { total: l.total, averagePerWindow: l.average_per_window, peak: l.peak, peakStartMs: l.peak_start_ms };
    }
    return { windows: w?.windows ?? 0, events: w?.events ?? 0, limits };
  }

  /** A resource's capacity and use, summed over its buckets (for dashboards, not hot paths). */
  async capacity(resource: string, opts: CallOptions = {}): Promise<ResourceCapacity> {
    const w = await this.#data<ResourceCapacity>({ method: "GET", path: "/v1/capacity", query: new URLSearchParams({ resource }), ...call(opts) });
    return { resource: w.resource, entities: w.entities, limits: (w.limits ?? []).map((l) => ({ ...l })) };
  }

  /**
   * The entities the server refused most in the client's namespace, most
   * refused first, of `resource` and `limit` when given; `n` (1 to 128,
   * default 128) bounds the list. Each server answers for the decisions it took.
   */
  async topDenied(args: { resource?: string | undefined; limit?: string | undefined; n?: number | undefined } & CallOptions = {}): Promise<DeniedEntity[]> {
    const query = new URLSearchParams();
    if (args.resource) query.set("resource", args.resource);
    if (args.limit) query.set("limit", args.limit);
    if (args.n !== undefined) query.set("n", String(args.n));
    const w = await this.#data<{ entities?: DeniedEntity[] }>({ method: "GET", path: "/v1/metrics/top-denied", query, ...call(args) });
    return (w?.entities ?? []).map((e) => ({ entity: e.entity, resource: e.resource, limit: e.limit, count: e.count, error: e.error }));
  }

  // --- namespaces (admin key for "*" only) --------------------------------

  /** Registers a namespace; a NamespaceExistsError if the name is taken, even by a deleted one. */
  async registerNamespace(name: string, opts: CallOptions = {}): Promise<Namespace> {
    return toNamespace(await this.#data<WireNamespace>({ method: "POST", path: "/v1/namespaces", body: { name }, ...call(opts) }));
  }

  /** Every namespace, deleted ones included, sorted by name. */
  async listNamespaces(opts: CallOptions = {}): Promise<Namespace[]> {
    const w = await this.#data<{ namespaces?: WireNamespace[] }>({ method: "GET", path: "/v1/namespaces", ...call(opts) });
    return (w?.namespaces ?? []).map(toNamespace);
  }

  /** The namespace, or a NamespaceNotFoundError. */
  async getNamespace(name: string, opts: CallOptions = {}): Promise<Namespace> {
    return toNamespace(await this.#data<WireNamespace>({ method: "GET", path: `/v1/namespaces/${seg(name)}`, ...call(opts) }));
  }

  /** Soft-deletes a namespace: calls in it then throw NamespaceDeletedError; `recoverNamespace` undoes it. */
  async deleteNamespace(name: string, opts: CallOptions = {}): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/namespaces/${seg(name)}`, ...call(opts) });
  }

  /** Undoes `deleteNamespace`. */
  async recoverNamespace(name: string, opts: CallOptions = {}): Promise<void> {
    await this.send({ method: "POST", path: `/v1/namespaces/${seg(name)}/recover`, ...call(opts) });
  }

  /** Deletes every item of a soft-deleted namespace, then the namespace; returns how many items went. Waits up to 10 minutes by default. */
  async purgeNamespace(name: string, opts: CallOptions = {}): Promise<number> {
    const w = await this.#data<{ deleted?: number }>({
      method: "POST",
      path: `/v1/namespaces/${seg(name)}/purge`,
      ...call(opts),
      timeoutMs: opts.timeoutMs ?? purgeTimeoutMs,
    });
    return w?.deleted ?? 0;
  }

  // --- health ------------------------------------------------------------

  /** GET /healthz: resolves while the server answers HTTP; else ServerUnreachableError (or the error it answered). */
  async health(opts: CallOptions = {}): Promise<void> {
    await this.send({ method: "GET", path: "/healthz", ...call(opts) });
  }

  /** GET /readyz: resolves when the server and its store answer; UnavailableError when the store does not. */
  async ready(opts: CallOptions = {}): Promise<void> {
    await this.send({ method: "GET", path: "/readyz", ...call(opts) });
  }
}

/**
 * Commits a lease its work has not ended; if the commit fails and the lease
 * is still open, rolls it back (ignoring that error: the commit's matters
 * more) and rethrows.
 */
async function commitOrRollback(lease: Lease): Promise<void> {
  if (!lease.open) return;
  try {
    await lease.commit();
  } catch (err) {
    if (lease.open) {
      await lease.rollback().catch(() => undefined);
    }
    throw err;
  }
}
