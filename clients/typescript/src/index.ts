// Tollgate's TypeScript client: `new Client({ baseUrl })`, leases, typed
// errors. No runtime dependency: the global fetch (Node 18+).

export {
  Client,
  defaultTimeoutMs,
  defaultUserAgent,
  idempotencyKeyHeader,
  minSlotTtlMs,
  namespaceHeader,
  principalHeader,
  purgeTimeoutMs,
  replayedHeader,
} from "./client.js";
export type { ClientOptions } from "./client.js";
export { abandonDelaysMs, idempotentLeaseId, maxAbandoning } from "./abandon.js";
export type { AbandonOutcome, Abandoned } from "./abandon.js";
export { version } from "./version.js";
export { Lease } from "./lease.js";
export type { LeaseState } from "./lease.js";
export {
  BadResponseError,
  ConflictError,
  EntityExistsError,
  EntityNotFoundError,
  ForbiddenError,
  IdempotencyConflictError,
  KeyExistsError,
  KeyNotFoundError,
  LeaseClosedError,
  LeaseEndedError,
  LeaseNotFoundError,
  NamespaceDeletedError,
  NamespaceExistsError,
  NamespaceNotFoundError,
  NotFoundError,
  PreconditionFailedError,
  RateLimitExceeded,
  ReservationConflictError,
  ReservationNotFoundError,
  ServerError,
  ServerUnreachableError,
  SlotLostError,
  TollgateError,
  UnauthorizedError,
  UnavailableError,
  UnimplementedError,
  ValidationError,
  maxRetryAfterMs,
  slotPollMs,
} from "./errors.js";
export type { ErrorDetails } from "./errors.js";
export type * from "./types.js";
