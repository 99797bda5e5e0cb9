// Public types of the client: the wire format of docs/http-api.md, with
// camelCase names. Token amounts are whole tokens, durations milliseconds
// (`...Ms`), times Unix milliseconds (`...AtMs`).

/** Tokens to take (or, in an adjustment, to add or give back) per limit name. */
export type Consume = Record<string, number>;

/** What the server does when its store cannot answer: fail (`"block"`, the default) or grant without counting (`"allow"`). */
export type OnUnavailable = "block" | "allow";

/** The kind of a limit: refilled with time, a cap on work in flight, or a cap on reserved resource ids. */
export type LimitKind = "rate" | "concurrency" | "reserved";

/** The state of one limit in one bucket (entity and resource), as acquires, denials and `available` report it. */
export interface LimitStatus {
  entity: string;
  resource: string;
  /** The limit's name, e.g. `rpm`. */
  limit: string;
  kind: LimitKind;
  /** The bucket's ceiling (the burst, or the concurrency cap). */
  capacity: number;
  /** The balance after refill (after the debit, in a grant); negative in debt. */
  available: number;
  /** What the request asked of this limit (0 for limits it did not name). */
  requested: number;
  /** The balance could not cover `requested`. */
  exceeded: boolean;
  /**
   * The limit is enforced in shadow (its configuration's `shadow`):
   * exceeded, it would have denied, and did not. Absent when not.
   */
  shadow?: boolean;
  /**
   * The level that supplied the limit: a stored configuration's (`entity`,
   * `entity-default`, `resource`, `system`) or `call` (the request's own
   * limits). Absent when the server does not say.
   */
  source?: LimitSource;
  /**
   * How long refill alone needs to cover `requested`, however long
   * (saturated at 2^63-1 ms); 0 unless exceeded. For a concurrency or
   * reserved limit a hint, as `waits` says.
   */
  retryAfterMs: number;
  /**
   * Only for an exceeded concurrency or reserved limit: what it waits for,
   * `expiry` (`retryAfterMs` is the earliest expiry among its holders) or
   * `release` (no time is known).
   */
  waits?: Waits;
  /**
   * Only for a calendar quota (`tok:1000000/month@UTC`): when its current
   * window ends and it refills, in Unix milliseconds. An exceeded quota's
   * `retryAfterMs` is the time to the boundary that brings enough.
   */
  resetsAtMs?: number;
  /**
   * The span `capacity` is granted over, in milliseconds: for a rate limit
   * the time its refill takes to fill it from empty (60000 for
   * `rpm:100/min`), for a calendar quota its current window's length.
   * Absent for concurrency and reserved limits.
   */
  windowMs?: number;
}

/** The level that supplied a limit (LimitStatus.source). */
export type LimitSource = "entity" | "entity-default" | "resource" | "system" | "call";

/** What an exceeded concurrency or reserved limit waits for. */
export type Waits = "expiry" | "release";

/** Per-call options every method takes. */
export interface CallOptions {
  /** Aborts the call; the promise rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** Bounds this call (default: the client's `timeoutMs`). */
  timeoutMs?: number | undefined;
  /**
   * Who makes this change, recorded in its audit event: sent as
   * `X-Tollgate-Principal` for this call, replacing the client's
   * `principal` (absent or `""`: the client's). It matters on the calls
   * that write an audited change: entities, limits, `penalize` (and a
   * lease's), `reset`, `reserve`, `release`, `createKey`, `revokeKey`. At
   * most 256 bytes of UTF-8, no control characters (else a
   * ValidationError, before any call). A server with API keys records the
   * key's name instead.
   */
  principal?: string | undefined;
}

/**
 * Optimistic locking of a change of an entity or of stored limits
 * (`updateEntity`, `deleteEntity`, `setLimits`, `deleteLimits`): the change
 * is made only if the record is still at the version read, else a
 * PreconditionFailedError (412) and nothing changes.
 */
export interface VersionOptions extends CallOptions {
  /** The `version` read: sent as `If-Match`. */
  ifMatch?: number | undefined;
  /** `setLimits` only: store only if no limits are stored at the scope (`If-None-Match: *`). */
  ifAbsent?: boolean | undefined;
}

/** What `acquire`, `acquireAndCommit`, `wait` and `withLease` take. */
export interface AcquireArgs extends CallOptions {
  entity: string;
  resource: string;
  /** Tokens to take per limit name, e.g. `{ rpm: 1, tpm: 500 }`. */
  consume: Consume;
  /** Limits in the limit syntax (`rpm:100`, `rps:5/sec`, `tok:1000/month@UTC`, `inflight:4/concurrent`) replacing the stored ones for this call. */
  limits?: string[] | undefined;
  /** What the server does for this call if its store cannot answer; overrides the stored system setting. */
  onUnavailable?: OnUnavailable | undefined;
  /** How long the lease lives unless extended (the server accepts 1000 to 86400000; default 5 minutes). Ignored by `acquireAndCommit`. */
  leaseTtlMs?: number | undefined;
  /**
   * Names this request (1 to 255 printable ASCII characters, no space at
   * either end): the same key in the namespace, while the server remembers
   * the lease it granted (its expiry, and at least 10 minutes after it
   * ended; with `acquireAndCommit`, 10 minutes), answers that grant again
   * (`replayed`) and debits once; with another entity, resource or
   * consumption it is an IdempotencyConflictError, and once the lease has
   * ended a LeaseEndedError (a repeated `acquireAndCommit` replays its
   * grant). Default: a key of the client's own for this call, unless the
   * client has `idempotencyKeys: false`. `wait` and `withLease` send the
   * same key with each of their attempts.
   */
  idempotencyKey?: string | undefined;
}

/** What `wait` and `withLease` take besides `AcquireArgs`. */
export interface WaitArgs extends AcquireArgs {
  /**
   * How long to keep retrying after denials, in ms. `wait` retries after
   * each denial's `backoff()` until granted, until this much time has
   * passed (rejecting with the last `RateLimitExceeded` as soon as refill
   * could not grant it in time; a slot is tried once more at the end), or
   * until `signal` aborts. Absent: `wait` retries until granted or
   * aborted; `withLease` tries once.
   */
  waitMs?: number | undefined;
}

/** The outcome of `acquireAndCommit`. */
export interface Grant {
  /** Tokens consumed per limit: what was asked, once however many cascade levels it debited (each level's debit is in `limits`). */
  consumed: Consume;
  /** Every limit checked, with balances just after the debit. */
  statuses: LimitStatus[];
  /** The server's store could not answer and mode `"allow"` granted without counting. */
  degraded: boolean;
  /**
   * The answer was the grant of an earlier call with the same idempotency
   * key (a retry after a lost answer), given again: nothing was debited this
   * time, and `statuses` is empty.
   */
  replayed: boolean;
}

/** A lease as the lease routes report it. */
export interface LeaseInfo {
  leaseId: string;
  consumed: Consume;
  state: "open" | "committed" | "rolled_back";
  /** Absent for a degraded lease. */
  entity?: string;
  resource?: string;
  /** When an open lease expires unless extended; absent once ended and for a degraded lease. */
  expiresAtMs?: number;
}

/** An open durable lease, as `listLeases` lists it. */
export interface OpenLease {
  leaseId: string;
  entity: string;
  resource: string;
  /** The process that acquired it (`host/pid`). */
  holder?: string;
  createdAtMs?: number;
  /** When a reconciler ends it unless extended; absent: never. */
  expiresAtMs?: number;
  /** What it holds per limit (what was asked, once however many cascade levels it debited), pending adjustments included. */
  consumed: Consume;
}

/** A page of open durable leases. */
export interface LeasePage {
  leases: OpenLease[];
  /** Pass as `after` for the next page; absent on the last. */
  next?: string;
}

/** An entity: something limits apply to, in a tree through `parentId`. */
export interface Entity {
  id: string;
  name?: string;
  parentId?: string;
  /** Acquires of this entity also debit the parent's buckets (needs `parentId`). */
  cascade?: boolean;
  metadata?: Record<string, string>;
  /** Set by the server. */
  createdAtMs?: number;
  /** Counts the entity's changes (1 when created), set by the server: what `ifMatch` takes. */
  version?: number;
}

/** A page of entities (`listEntities`). */
export interface EntityPage {
  entities: Entity[];
  /** Present when the page is full: pass as `after` for the next one (which may be empty). */
  next?: string;
}

/**
 * What `updateEntity` changes: the fields present replace the stored ones,
 * those absent (or undefined) keep their values. `parentId: ""` makes the
 * entity a root and, unless `cascade` is given, stops its cascade;
 * `metadata: {}` removes the metadata; `name: ""` removes the name.
 */
export interface EntityPatch {
  name?: string | undefined;
  parentId?: string | undefined;
  cascade?: boolean | undefined;
  metadata?: Record<string, string> | undefined;
}

/**
 * Where limits are stored, most specific first: `{entity, resource}`,
 * `{entity}` (the entity's default for every resource), `{resource}`, `{}`
 * (the system).
 */
export interface Scope {
  entity?: string | undefined;
  resource?: string | undefined;
}

/** The limits stored at one scope. */
export interface LimitsConfig {
  /** Limits in the limit syntax; the server answers them in canonical form (`rpm:100` as `rpm:100/min`). */
  limits: string[];
  /** System scope only: what acquires do when the store cannot answer. */
  onUnavailable?: OnUnavailable;
  /** The limits enforced in shadow: debited, never denying. Absent when none. */
  shadow?: string[];
  /**
   * Alert thresholds: fractions of capacity, ascending, each in (0, 1], at
   * most 4. A server with `--alert-webhook` alerts when an entity's use of
   * a limit crosses one upward. Absent when none.
   */
  alertAt?: number[];
  /** Counts the puts at this scope (1 when stored where none was), set by the server (ignored by `setLimits`): what `ifMatch` takes. */
  version?: number;
}

/**
 * One stored configuration in a listing (`listLimits`) and its scope: no
 * `entity` nor `resource` for the system's, `resource` alone for a
 * resource's, `entity` with `resource` (`"_default_"` for the entity
 * default) for an entity's.
 */
export interface ScopedLimits extends LimitsConfig {
  entity?: string;
  resource?: string;
}

/** A page of stored configurations (`listLimits`). */
export interface LimitsPage {
  configs: ScopedLimits[];
  /** Present when the page is full: pass as `after` for the next one (an opaque cursor; the next page may be empty). */
  next?: string;
}

/** A reservation: one token of a `reserved` limit held under a unique resource id. */
export interface Reservation {
  id: string;
  entity: string;
  resource: string;
  /** The server process that made it (`host/pid`). */
  holder?: string;
  createdAtMs?: number;
  /** When a reconciler releases it; absent: never. */
  expiresAtMs?: number;
}

/** What `reserve` takes. */
export interface ReserveArgs extends CallOptions {
  entity: string;
  resource: string;
  /** The resource id to reserve (an EMR cluster, a job id, an ARN's resource part). */
  id: string;
  /** The reserved limits to take (1 each) and other limits to debit with them; absent: 1 of every reserved limit in effect. */
  consume?: Consume | undefined;
  limits?: string[] | undefined;
  /** The reservation expires (a reconciler releases it) this long from now: 1000 to 86400000. Absent: never. */
  ttlMs?: number | undefined;
  onUnavailable?: OnUnavailable | undefined;
}

/** The outcome of `reserve`. */
export interface Reserved extends Reservation {
  /** False when the same entity and resource held the id already: nothing was debited again (the server answered 200, not 201). */
  isNew: boolean;
  consumed: Consume;
  statuses: LimitStatus[];
  degraded: boolean;
}

/** A page of reservations. */
export interface ReservationPage {
  reservations: Reservation[];
  /** Pass as `after` for the next page; absent on the last. */
  next?: string;
}

/** A penalty: empty `limits` until `untilMs`, or for `retryAfterMs` from the server's now (give exactly one). */
export interface Penalty extends CallOptions {
  untilMs?: number | undefined;
  retryAfterMs?: number | undefined;
  /** Names of rate limits in effect to empty. */
  limits: string[];
  /** Kept in the audit event. */
  reason?: string | undefined;
}

/** What `penalize` takes. */
export interface PenalizeArgs extends Penalty {
  entity: string;
  resource: string;
}

/** An audit event of a change to entities or limits. */
export interface AuditEvent {
  id: string;
  timeMs: number;
  action: string;
  entity?: string;
  resource?: string;
  principal?: string;
  details?: Record<string, string>;
}

/** A page of audit events. */
export interface AuditPage {
  events: AuditEvent[];
  /** Present when the page is full: pass as `after` for the next one. */
  next?: string;
}

/** A namespace of the registry. */
export interface Namespace {
  name: string;
  id: string;
  createdAtMs?: number;
  /** Present while soft-deleted. */
  deletedAtMs?: number;
}

/** What `reset` takes. */
export interface ResetArgs extends CallOptions {
  entity: string;
  resource: string;
  /** The rate limits to refill; absent: every refilling limit the bucket holds. */
  limits?: string[] | undefined;
  /** Kept in the audit event (`limit.reset`). */
  reason?: string | undefined;
}

/** The role of an API key (docs/security.md): what its calls may do in its namespace. */
export type KeyRole = "acquire" | "read" | "admin";

/** A stored API key, as `listKeys` lists it: never its secret, nor its hash. */
export interface KeyInfo {
  name: string;
  namespace: string;
  role: KeyRole;
  /** The key acts on this entity and its descendants only; absent: on every entity. */
  entity?: string;
  /** The key may send its own limits, and `onUnavailable: "allow"` where the stored mode is block (admin keys may anyway). */
  allowLimits: boolean;
  createdAtMs: number;
  /** When the key stops working; absent: never (until revoked). */
  expiresAtMs?: number;
}

/** The outcome of `createKey`: the key, and its secret in `key`, shown this once (the server keeps a hash). */
export interface CreatedKey extends KeyInfo {
  /** The secret: `new Client({ baseUrl, apiKey: created.key })`. */
  key: string;
}

/** What `createKey` takes. */
export interface CreateKeyArgs extends CallOptions {
  /** Unique in the namespace (`^[A-Za-z0-9][A-Za-z0-9_.:@-]*$`, at most 64 bytes): the principal of what the key changes. */
  name: string;
  role: KeyRole;
  /** Confines the key to this entity and its descendants. */
  entity?: string | undefined;
  /** Lets the key send its own limits and a looser unavailable mode. */
  allowLimits?: boolean | undefined;
  /** How long the key works, rounded up to whole seconds; absent: until revoked. */
  expiresInMs?: number | undefined;
}

/** A page of stored API keys (`listKeys`). */
export interface KeyPage {
  keys: KeyInfo[];
  /** Present when the page is full: pass as `after` for the next one (which may be empty). */
  next?: string;
}

/** A usage query: `entity`, or `resource`, or both. */
export interface UsageQuery extends CallOptions {
  entity?: string | undefined;
  resource?: string | undefined;
  window?: "hour" | "day" | undefined;
  /** Window starts from (inclusive), Unix ms. */
  fromMs?: number | undefined;
  /** Window starts to (exclusive), Unix ms. */
  toMs?: number | undefined;
  after?: string | undefined;
  limit?: number | undefined;
}

/** One usage snapshot. */
export interface Usage {
  entity: string;
  resource: string;
  window: "hour" | "day";
  startMs: number;
  consumed: Consume;
  events: number;
}

/** A page of usage snapshots. */
export interface UsagePage {
  usage: Usage[];
  next?: string;
}

/** Totals of usage over a range. */
export interface UsageSummary {
  windows: number;
  events: number;
  limits: Record<string, { total: number; averagePerWindow: number; peak: number; peakStartMs: number }>;
}

/** A resource's capacity and use, summed over its buckets. */
export interface ResourceCapacity {
  resource: string;
  entities: number;
  limits: { limit: string; kind: LimitKind; capacity: number; available: number; utilisation: number }[];
}

/** An entity a limit of a resource refused, with how often (`topDenied`): `count` is at most `error` over the true number. */
export interface DeniedEntity {
  entity: string;
  resource: string;
  limit: string;
  count: number;
  error: number;
}
