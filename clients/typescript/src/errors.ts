// Typed errors, one class per kind of answer, as the Go client returns the
// library's errors (docs/http-api.md, "4. Errors").

import type { LimitSource, LimitStatus, Waits } from "./types.js";

/** The error body the server sends with every error answer. */
export interface ErrorBody {
  /** The stable code: `invalid_argument`, `rate_limited`, `not_found`, ... */
  error: string;
  message: string;
  reason?: string;
  field?: string;
  value?: string;
  retry_after_ms?: number;
  waits?: string;
  limits?: WireLimitStatus[];
  /** For `lease_closed`: how the lease ended (`committed`, `rolled_back`, `expired`). */
  ended?: string;
}

/** A limit status as the server writes it. */
export interface WireLimitStatus {
  entity: string;
  resource: string;
  limit: string;
  kind: LimitStatus["kind"];
  capacity: number;
  available: number;
  requested: number;
  exceeded: boolean;
  shadow?: boolean;
  source?: string;
  retry_after_ms: number;
  waits?: string;
  resets_at_ms?: number;
  window_ms?: number;
}

export function toStatus(s: WireLimitStatus): LimitStatus {
  const st: LimitStatus = {
    entity: s.entity,
    resource: s.resource,
    limit: s.limit,
    kind: s.kind,
    capacity: s.capacity,
    available: s.available,
    requested: s.requested,
    exceeded: s.exceeded,
    retryAfterMs: clampMs(s.retry_after_ms ?? 0),
  };
  const waits = toWaits(s.waits);
  if (waits !== undefined) {
    st.waits = waits;
  }
  if (s.shadow) {
    st.shadow = true;
  }
  const source = toSource(s.source);
  if (source !== undefined) {
    st.source = source;
  }
  // A calendar quota's window end; absent (or nonsense) for other limits.
  if (typeof s.resets_at_ms === "number" && Number.isSafeInteger(s.resets_at_ms) && s.resets_at_ms > 0) {
    st.resetsAtMs = s.resets_at_ms;
  }
  // The span capacity is granted over; absent for concurrency and reserved limits.
  if (typeof s.window_ms === "number" && Number.isSafeInteger(s.window_ms) && s.window_ms > 0) {
    st.windowMs = s.window_ms;
  }
  return st;
}

/** A wire `waits`, if it is one this client knows. */
function toWaits(w: unknown): Waits | undefined {
  return w === "expiry" || w === "release" ? w : undefined;
}

const sources: readonly string[] = ["entity", "entity-default", "resource", "system", "call"];

function toSource(s: unknown): LimitSource | undefined {
  return typeof s === "string" && sources.includes(s) ? (s as LimitSource) : undefined;
}

/**
 * How often `wait` looks again at a concurrency or reserved limit that only
 * a release can free, unless a holder's expiry comes sooner: about one call
 * a second per waiter (the Go library's SlotPoll).
 */
export const slotPollMs = 1_000;

/** What every TollgateError carries besides its message. */
export interface ErrorDetails {
  /** The HTTP status of the answer; absent when no answer was received. */
  status?: number | undefined;
  /** The `error` code of the answer's body (`not_found`, ...). */
  code?: string | undefined;
  /** The `reason` of the answer's body (`lease_not_found`, ...). */
  reason?: string | undefined;
  /** The call, e.g. `POST /v1/acquire`. */
  op?: string | undefined;
  cause?: unknown;
}

/** The base of every error the client throws (but the caller's own `AbortSignal` reason). */
export class TollgateError extends Error {
  override name = "TollgateError";
  readonly status: number | undefined;
  readonly code: string | undefined;
  readonly reason: string | undefined;
  readonly op: string | undefined;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.status = details.status;
    this.code = details.code;
    this.reason = details.reason;
    this.op = details.op;
  }
}

/** `429 rate_limited`: the acquire or reservation was denied; nothing was consumed anywhere. */
export class RateLimitExceeded extends TollgateError {
  override name = "RateLimitExceeded";
  /**
   * How long to wait before trying again: the longest wait among the
   * exceeded limits, however long (deep debt at a slow rate can take
   * millennia; saturated at 2^63-1 ms). For concurrency and reserved
   * limits a hint, as `waits` says: 0 for a full reserved limit waiting
   * for a release.
   */
  readonly retryAfterMs: number;
  /**
   * What the primary violation waits for when it is a concurrency or
   * reserved limit: `expiry` (`retryAfterMs` is the earliest expiry among
   * its holders) or `release` (no time is known); absent for refill.
   */
  readonly waits: Waits | undefined;
  /** Every limit checked, with `exceeded` set on the violations. */
  readonly statuses: LimitStatus[];

  constructor(message: string, retryAfterMs: number, statuses: LimitStatus[], details: ErrorDetails = {}, waits?: Waits) {
    super(message, details);
    this.retryAfterMs = retryAfterMs;
    this.statuses = statuses;
    this.waits = waits;
  }

  /** The limits that denied (a limit in shadow never does). */
  get exceeded(): LimitStatus[] {
    return this.statuses.filter((s) => s.exceeded && !s.shadow);
  }

  /**
   * How long a waiter sleeps before trying again (`sleepMs`, at least 1)
   * and how long no try can succeed (`leastMs`). Each violation asks for
   * its own wait and the longest wins: a rate limit its `retryAfterMs`,
   * exactly (refill is foretold: `leastMs` is the longest of these); a
   * concurrency or reserved limit `slotPollMs`, since a holder may end its
   * lease at any time, sooner when a holder's expiry comes first (`waits`
   * `expiry`), later when the server's hint says so. Without statuses,
   * `retryAfterMs`. As the Go RateLimitExceeded.Backoff.
   */
  backoff(): { sleepMs: number; leastMs: number } {
    let sleepMs = 0;
    let leastMs = 0;
    let found = false;
    for (const s of this.statuses) {
      if (!s.exceeded || s.shadow) continue;
      found = true;
      if (s.kind !== "concurrency" && s.kind !== "reserved") {
        sleepMs = Math.max(sleepMs, s.retryAfterMs);
        leastMs = Math.max(leastMs, s.retryAfterMs);
      } else if (s.waits === "expiry" && s.retryAfterMs > 0) {
        sleepMs = Math.max(sleepMs, Math.min(s.retryAfterMs, slotPollMs));
      } else {
        sleepMs = Math.max(sleepMs, s.retryAfterMs, slotPollMs);
      }
    }
    if (!found) {
      sleepMs = leastMs = this.retryAfterMs;
    }
    return { sleepMs: Math.max(sleepMs, 1), leastMs };
  }
}

/** `400 invalid_argument` (or a check the client makes before calling): `field` names what is wrong, e.g. `consume.rpm`. */
export class ValidationError extends TollgateError {
  override name = "ValidationError";
  /** The offending field: `consume.rpm`, `limits`, `lease_ttl_ms`, `entity`, ... */
  readonly field: string;
  /** Its value (truncated by the server to 80 bytes); may be empty. */
  readonly value: string;

  constructor(message: string, field: string, value: string, details: ErrorDetails = {}) {
    super(message, details);
    this.field = field;
    this.value = value;
  }
}

/** `401 unauthenticated`: no API key, or an unknown one. */
export class UnauthorizedError extends TollgateError {
  override name = "UnauthorizedError";
}

/**
 * `403 permission_denied`: the key's role, namespace or entity scope does
 * not allow the call. `field` names what the key may not send or reach, if
 * that is why: `limits` (its own limits, without `allowLimits`),
 * `on_unavailable` (`allow` where the stored mode is block, without
 * `allowLimits`) or `entity` (beyond the entity the key is confined to);
 * it is `""` for a refusal of the key's role or namespace. `reason` then
 * says why.
 */
export class ForbiddenError extends TollgateError {
  override name = "ForbiddenError";
  /** The field the key may not send or reach (`limits`, `on_unavailable`, `entity`), or `""`. */
  readonly field: string;

  constructor(message: string, details: ErrorDetails = {}, field = "") {
    super(message, details);
    this.field = field;
  }
}

/** `404 not_found`; `reason` says what: `not_found` (no limits at that scope), `no_route`, or a subclass's. */
export class NotFoundError extends TollgateError {
  override name = "NotFoundError";
}

/** `404 entity_not_found`. */
export class EntityNotFoundError extends NotFoundError {
  override name = "EntityNotFoundError";
}

/** `404 namespace_not_found`: the namespace is not registered. */
export class NamespaceNotFoundError extends NotFoundError {
  override name = "NamespaceNotFoundError";
}

/** `404 key_not_found`: the namespace has no stored API key of that name (keys of the server's keys file are not stored). */
export class KeyNotFoundError extends NotFoundError {
  override name = "KeyNotFoundError";
}

/**
 * `404 lease_not_found`: a lease the server does not have (never granted,
 * another namespace's, open with its expiry passed, or ended so long ago
 * that it is forgotten: a lease that ended recently is a LeaseEndedError),
 * or a reservation id that holds no reservation. Releasing on an event that
 * may come twice can treat it as done.
 */
export class LeaseNotFoundError extends NotFoundError {
  override name = "LeaseNotFoundError";
}

/**
 * `404 lease_not_found` from the reservation routes: the resource id holds
 * no reservation in the client's namespace (never made, released, expired).
 * Releasing on an event that may come twice can treat it as done.
 */
export class ReservationNotFoundError extends LeaseNotFoundError {
  override name = "ReservationNotFoundError";
}

/**
 * The lease is over for this handle: it was committed or rolled back
 * through it (thrown without calling the server), the server answered that
 * it has ended (the subclass LeaseEndedError, `status` 409), or that it no
 * longer has it (`status` 404). Being a LeaseNotFoundError, it is caught as
 * one.
 */
export class LeaseClosedError extends LeaseNotFoundError {
  override name = "LeaseClosedError";
}

/**
 * `409 lease_closed`: the lease has ended (through any handle or server, or
 * by the reconciler at its expiry), and `ended` says how. The server
 * remembers an ended lease for at least 10 minutes after it ended, and
 * until its expiry. A commit of a committed lease succeeds instead, and a
 * rollback of a rolled-back lease is done.
 */
export class LeaseEndedError extends LeaseClosedError {
  override name = "LeaseEndedError";
  /** How the lease ended: `committed`, `rolled_back` or `expired`. */
  readonly ended: string;

  constructor(message: string, ended: string, details: ErrorDetails = {}) {
    super(message, details);
    this.ended = ended;
  }
}

/**
 * A slot's lease was found gone while its work ran (`Client.slot`): an
 * extension was answered that the lease has ended or that the server no
 * longer has it (a reconciler took it at its expiry, another handle ended
 * it), as Go's ErrSlotLost. The slot is no longer held. `cause` is the
 * extension's error; the work's `AbortSignal` aborts with this error.
 */
export class SlotLostError extends LeaseClosedError {
  override name = "SlotLostError";
}

/** `409 conflict`; `reason` says which. */
export class ConflictError extends TollgateError {
  override name = "ConflictError";
}

/**
 * `409 idempotency_key_reused`: an acquire's idempotency key was used
 * before with another request (another entity, resource or consumption);
 * a key names one request. Nothing was debited.
 */
export class IdempotencyConflictError extends ConflictError {
  override name = "IdempotencyConflictError";
}

/** `409 reservation_conflict`: another entity or resource holds the reservation id. */
export class ReservationConflictError extends ConflictError {
  override name = "ReservationConflictError";
}

/** `409 entity_exists`. */
export class EntityExistsError extends ConflictError {
  override name = "EntityExistsError";
}

/** `409 namespace_exists` (the name may be taken by a deleted namespace). */
export class NamespaceExistsError extends ConflictError {
  override name = "NamespaceExistsError";
}

/** `409 key_exists`: the namespace has a stored API key of that name. */
export class KeyExistsError extends ConflictError {
  override name = "KeyExistsError";
}

/** `409 namespace_deleted`: the namespace is soft-deleted. */
export class NamespaceDeletedError extends ConflictError {
  override name = "NamespaceDeletedError";
}

/**
 * `412 precondition_failed`: a change made on a version (`ifMatch`, the
 * `version` read) found the entity or limits at another one, as someone
 * else changed them since; or, with `ifAbsent`, limits were stored.
 * Nothing was written: read again and decide.
 */
export class PreconditionFailedError extends TollgateError {
  override name = "PreconditionFailedError";
}

/**
 * `503 unavailable`: the server answered, but its store did not (or a
 * gateway in front of it answered 502, 503 or 504). With mode `"block"`
 * nothing was done; the call can be retried.
 */
export class UnavailableError extends TollgateError {
  override name = "UnavailableError";
}

/**
 * The client could not get an answer from the server: connection refused or
 * reset, DNS failure, TLS failure, or the call's timeout (`timedOut`). The
 * outcome is unknown: an acquire may have been granted with its answer lost
 * (the server's reconciler commits such a lease when its TTL ends). It is
 * an `UnavailableError`, as in the Go client: no decision reached the
 * caller, so a fail-open or fail-closed choice applies alike.
 */
export class ServerUnreachableError extends UnavailableError {
  override name = "ServerUnreachableError";
  /** The call's timeout passed before the answer came. */
  readonly timedOut: boolean;

  constructor(message: string, timedOut: boolean, details: ErrorDetails = {}) {
    super(message, details);
    this.timedOut = timedOut;
  }
}

/** `501 unimplemented`: the server's store does not support the call (usage, capacity). */
export class UnimplementedError extends TollgateError {
  override name = "UnimplementedError";
}

/** `500 internal`, or another 5xx answer the API does not define. */
export class ServerError extends TollgateError {
  override name = "ServerError";
}

/** An answer the client could not read: not JSON, not the expected shape, or larger than 1 MiB. */
export class BadResponseError extends TollgateError {
  override name = "BadResponseError";
}

const maxMessageLength = 512;
const maxFieldLength = 128;
/** The longest retry-after the API sends: 2^63-1 ms (as the nearest double); longer ones saturate there. */
export const maxRetryAfterMs = 2 ** 63;

function truncate(s: unknown, n: number): string {
  return typeof s === "string" ? (s.length > n ? s.slice(0, n) : s) : "";
}

/** Bounds a retry-after from the server: a number of ms, never negative, saturated at maxRetryAfterMs. */
export function clampMs(ms: unknown): number {
  if (typeof ms !== "number" || Number.isNaN(ms) || ms < 0) {
    return 0;
  }
  return Math.min(Math.ceil(ms), maxRetryAfterMs);
}

/** Parses a Retry-After header in seconds; 0 if absent or not a number of seconds. */
function retryAfterHeaderMs(h: string | null): number {
  if (h === null || !/^\s*\d+\s*$/.test(h)) {
    return 0;
  }
  return clampMs(Number(h) * 1000);
}

function isErrorBody(v: unknown): v is ErrorBody {
  return typeof v === "object" && v !== null && typeof (v as { error?: unknown }).error === "string" && (v as { error: string }).error !== "";
}

/**
 * Turns an error answer into its TollgateError: the body the server writes
 * or, for a body that is not one (a proxy's page), an error inferred from
 * the status alone.
 */
export function errorFromResponse(status: number, headers: Headers, text: string, op: string): TollgateError {
  let body: ErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (isErrorBody(parsed)) {
      body = parsed;
    }
  } catch {
    // not JSON: inferred below
  }
  if (body === undefined) {
    return inferError(status, headers, text, op);
  }
  const message = truncate(body.message, maxMessageLength) || `${status} ${body.error}`;
  const reason = truncate(body.reason, maxFieldLength) || undefined;
  const d: ErrorDetails = { status, code: body.error, reason, op };
  switch (body.error) {
    case "rate_limited": {
      const statuses = Array.isArray(body.limits) ? body.limits.map(toStatus) : [];
      let retry = clampMs(body.retry_after_ms);
      if (retry === 0) {
        // Absent: none (a release awaited), unless a header says one.
        retry = retryAfterHeaderMs(headers.get("retry-after"));
      }
      return new RateLimitExceeded(message, retry, statuses, d, toWaits(body.waits));
    }
    case "invalid_argument":
      return new ValidationError(message, truncate(body.field, maxFieldLength), truncate(body.value, maxFieldLength), d);
    case "unauthenticated":
      return new UnauthorizedError(message, d);
    case "permission_denied":
      return new ForbiddenError(message, d, truncate(body.field, maxFieldLength));
    case "not_found":
      switch (reason) {
        case "entity_not_found":
          return new EntityNotFoundError(message, d);
        case "namespace_not_found":
          return new NamespaceNotFoundError(message, d);
        case "lease_not_found":
          return new LeaseNotFoundError(message, d);
        case "key_not_found":
          return new KeyNotFoundError(message, d);
        default:
          return new NotFoundError(message, d);
      }
    case "conflict":
      switch (reason) {
        case "reservation_conflict":
          return new ReservationConflictError(message, d);
        case "entity_exists":
          return new EntityExistsError(message, d);
        case "namespace_exists":
          return new NamespaceExistsError(message, d);
        case "namespace_deleted":
          return new NamespaceDeletedError(message, d);
        case "key_exists":
          return new KeyExistsError(message, d);
        case "idempotency_key_reused":
          return new IdempotencyConflictError(message, d);
        case "lease_closed": {
          const ended = truncate(body.ended, maxFieldLength);
          // Without ended: servers before leases lived in the store.
          return ended ? new LeaseEndedError(message, ended, d) : new LeaseClosedError(message, d);
        }
        default:
          return new ConflictError(message, d);
      }
    case "precondition_failed":
      return new PreconditionFailedError(message, d);
    case "unavailable":
      return new UnavailableError(message, d);
    case "unimplemented":
      return new UnimplementedError(message, d);
    case "internal":
      return new ServerError(message, d);
    default:
      return status >= 500 ? new ServerError(message, d) : new TollgateError(message, d);
  }
}

function inferError(status: number, headers: Headers, text: string, op: string): TollgateError {
  const snippet = text.trim().slice(0, 200);
  const message = `${op}: HTTP ${status}${snippet ? `: ${snippet}` : ""}`;
  const d: ErrorDetails = { status, op };
  switch (status) {
    case 401:
      return new UnauthorizedError(message, d);
    case 403:
      return new ForbiddenError(message, d);
    case 412:
      return new PreconditionFailedError(message, d);
    case 429:
      return new RateLimitExceeded(message, retryAfterHeaderMs(headers.get("retry-after")), [], d);
    case 502:
    case 503:
    case 504:
      return new UnavailableError(message, d);
    default:
      return status >= 500 ? new ServerError(message, d) : new TollgateError(message, d);
  }
}
