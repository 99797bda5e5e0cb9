"""Typed errors of the Tollgate client.

Every error the client raises is a :class:`TollgateError`. The server's
error body (``{"error": CODE, "reason": ..., "field": ...}``, see
docs/http-api.md section 4) decides the class::

    TollgateError
    ├── RateLimitExceeded          429 rate_limited: retry_after, statuses
    ├── ValidationError            400 invalid_argument: field, value, reason
    │                              (also a ValueError; raised locally for bad arguments)
    ├── Unauthorized               401 unauthenticated
    ├── Forbidden                  403 permission_denied: field (limits,
    │                              on_unavailable, entity, or "")
    ├── NotFound                   404 not_found
    │   ├── EntityNotFound         reason entity_not_found
    │   ├── NamespaceNotFound      reason namespace_not_found
    │   ├── KeyNotFound            reason key_not_found
    │   └── LeaseNotFound          reason lease_not_found
    │       └── ReservationNotFound    the same reason, from a reservation route
    ├── Conflict                   409 conflict
    │   ├── EntityExists           reason entity_exists
    │   ├── NamespaceExists        reason namespace_exists
    │   ├── KeyExists              reason key_exists
    │   ├── NamespaceDeleted       reason namespace_deleted
    │   ├── ReservationConflict    reason reservation_conflict
    │   ├── IdempotencyConflict    reason idempotency_key_reused: an acquire's
    │   │                          idempotency key was sent with another request
    │   └── LeaseClosed            the lease handle has ended (raised locally,
    │       │                      or 409 lease_closed without ``ended``)
    │       └── LeaseEnded         409 lease_closed: the lease has ended, and
    │                              ``ended`` says how
    ├── PreconditionFailed         412 precondition_failed: the entity or
    │                              limits changed since the version named
    │                              (if_match), or exist (if_absent)
    ├── Unavailable                503 unavailable: the server's *store* did not answer
    ├── Unimplemented              501 unimplemented (usage or capacity unsupported)
    ├── ServerError                500 internal, or any other unexpected status
    ├── ServerUnreachable          no answer at all: connection refused, DNS,
    │                              TLS, timeout, connection reset
    └── BadResponse                an answer that is not what the API sends
                                   (not JSON, wrong shape, too large)

A lease that has ended (committed or rolled back through any handle or
server, or expired and ended by a reconciler) is remembered by the server
for at least 10 minutes after it ended, and until its expiry: calls on it
raise :class:`LeaseEnded`, whose ``ended`` is ``"committed"``,
``"rolled_back"`` or ``"expired"`` (a commit of a committed lease succeeds
instead, answered as the first commit). A lease the server has forgotten,
or never granted, is a 404 ``lease_not_found``: received through a
:class:`~tollgate.Lease` handle it is raised as an error that is both a
:class:`LeaseNotFound` and a :class:`LeaseClosed` (as the Go client's
matches both ErrLeaseNotFound and ErrLeaseClosed). Either way the lease is
over for that handle.

``Unavailable`` and ``ServerUnreachable`` are deliberately distinct: the
first means the server answered that its store is down (the server's
``on_unavailable`` mode could have allowed the call), the second that no
server answered. In both cases no decision was received; for a call that
writes (acquire, commit), its outcome is unknown. Catch both with
``except (Unavailable, ServerUnreachable)`` to fail open. The calls that are
safe to repeat (an acquire with an idempotency key, a lease's commit,
rollback, extend and penalize, reads) are sent again by the client when no
answer came back, up to 3 times in all, before it raises
ServerUnreachable.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "TollgateError",
    "RateLimitExceeded",
    "ValidationError",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "EntityNotFound",
    "NamespaceNotFound",
    "KeyNotFound",
    "LeaseNotFound",
    "ReservationNotFound",
    "Conflict",
    "EntityExists",
    "NamespaceExists",
    "KeyExists",
    "NamespaceDeleted",
    "ReservationConflict",
    "IdempotencyConflict",
    "LeaseClosed",
    "LeaseEnded",
    "PreconditionFailed",
    "SlotLost",
    "Unavailable",
    "Unimplemented",
    "ServerError",
    "ServerUnreachable",
    "BadResponse",
]


class TollgateError(Exception):
    """Base of every error raised by the client.

    Attributes:
        message: human-readable text (the server's ``message`` when it sent one).
        status: the HTTP status of the answer, or None when there was none.
        code: the server's stable error code (``"not_found"``...), or "".
        reason: the server's ``reason`` ("lease_not_found"...; for a
            ValidationError, what is wrong with the field), or "".
        body: the decoded error body, or {} (bounded: see MAX_RESPONSE_BYTES).
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: str = "",
        reason: str = "",
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.reason = reason
        self.body: Dict[str, Any] = body if body is not None else {}

    def __str__(self) -> str:
        return self.message


#: How often wait() looks again at a concurrency or reserved limit that only
#: a release can free, unless a holder's expiry comes sooner: about one call
#: a second per waiter (the Go library's SlotPoll).
SLOT_POLL = 1.0

_SLOT_KINDS = ("concurrency", "reserved")


def saturated_timedelta(ms: int) -> timedelta:
    """ms milliseconds as a timedelta, saturated at timedelta.max (about
    2.7 million years) rather than raising OverflowError."""
    if ms >= _MAX_TIMEDELTA_MS:
        return timedelta.max
    return timedelta(milliseconds=max(ms, 0))


_MAX_TIMEDELTA_MS = timedelta.max // timedelta(milliseconds=1)


class RateLimitExceeded(TollgateError):
    """The acquire (or reservation) was denied; nothing was consumed.

    Attributes:
        retry_after: seconds (float) before refill alone could grant the same
            request: the longest wait among the exceeded limits, however long
            (deep debt at a slow rate can take millennia). When only
            concurrency or reserved limits deny, it is a hint (see waits): 0
            for a full reserved limit waiting for a release.
        retry_after_ms: the same in whole milliseconds, exact.
        waits: what the primary violation waits for when it is a concurrency
            or reserved limit: "expiry" (retry_after is the earliest expiry
            among its holders) or "release" (no time is known); "" for a rate
            limit's refill.
        statuses: every limit checked (:class:`tollgate.LimitStatus`), with
            ``exceeded`` set on the violations.
    """

    def __init__(self, message: str, *, retry_after: float, statuses: List[Any],
                 retry_after_ms: Optional[int] = None, waits: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after
        self.retry_after_ms = int(retry_after * 1000) if retry_after_ms is None else retry_after_ms
        self.waits = waits
        self.statuses = statuses

    @property
    def retry_after_timedelta(self) -> timedelta:
        """retry_after as a :class:`datetime.timedelta`, saturated at
        timedelta.max."""
        return saturated_timedelta(self.retry_after_ms)

    def backoff(self) -> Tuple[float, float]:
        """(sleep, least) in seconds: how long a waiter sleeps before trying
        again, and how long no try can succeed. Each violation asks for its
        own wait and the longest wins: a rate limit its retry_after, exactly
        (refill is foretold: least is the longest of these); a concurrency
        or reserved limit SLOT_POLL, since a holder may end its lease at any
        time, sooner when a holder's expiry comes first (waits "expiry"),
        later when the server's hint says so. Without statuses,
        retry_after. As the Go RateLimitExceeded.Backoff."""
        sleep, least, found = 0.0, 0.0, False
        for s in self.statuses:
            if not s.denies:
                continue
            found = True
            if s.kind not in _SLOT_KINDS:
                sleep, least = max(sleep, s.retry_after), max(least, s.retry_after)
            elif s.waits == "expiry" and s.retry_after > 0:
                sleep = max(sleep, min(s.retry_after, SLOT_POLL))
            else:
                sleep = max(sleep, s.retry_after, SLOT_POLL)
        if not found:
            sleep = least = self.retry_after
        return max(sleep, 0.001), least

    @property
    def exceeded(self) -> List[Any]:
        """The statuses of the limits that denied (a shadow limit never does)."""
        return [s for s in self.statuses if s.denies]


class ValidationError(TollgateError, ValueError):
    """Bad input: nothing was written.

    Attributes:
        field: the offending field as the server names it (``consume.rpm``,
            ``limits``, ``lease_ttl_ms``, ``body``...), or the argument the
            client rejected before calling.
        value: the offending value as text (truncated), or "".
        reason: what is wrong with it.
    """

    def __init__(self, message: str, *, field: str = "", value: str = "", **kw: Any) -> None:
        kw.setdefault("code", "invalid_argument")
        super().__init__(message, **kw)
        self.field = field
        self.value = value


class Unauthorized(TollgateError):
    """401: no API key, or one the server does not know."""


class Forbidden(TollgateError):
    """403: the API key's role, namespace or entity scope does not allow
    the call.

    Attributes:
        field: set when the key may not send a field's value or reach an
            entity: ``"limits"`` (its own limits, without ``allow_limits``),
            ``"on_unavailable"`` (``allow`` where the stored mode is block,
            without ``allow_limits``), ``"entity"`` (beyond the entity the
            key is confined to); "" for a role or namespace refusal.
        reason: why, as the server says it (free text), or "".
    """

    def __init__(self, message: str, *, field: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.field = field


class NotFound(TollgateError):
    """404: see ``reason`` (``not_found`` for limits not stored at a level,
    ``no_route`` for a path the server does not serve)."""


class EntityNotFound(NotFound):
    """The entity (or a new entity's parent) does not exist."""


class NamespaceNotFound(NotFound):
    """The namespace is not registered."""


class KeyNotFound(NotFound):
    """The namespace has no stored API key of that name (keys of the
    server's keys file are not stored)."""


class LeaseNotFound(NotFound):
    """The server has no such lease in the client's namespace: never
    granted, another namespace's, open with its expiry passed (a reconciler
    will end it), or ended so long ago that it is forgotten. A lease that
    ended recently is a :class:`LeaseEnded` instead."""


class ReservationNotFound(LeaseNotFound):
    """The resource id holds no reservation in the client's namespace
    (never made, released, expired). Releasing on an event that may repeat
    can treat it as done."""


class Conflict(TollgateError):
    """409: the call conflicts with the current state; see ``reason``."""


class EntityExists(Conflict):
    """An entity with that id exists."""


class NamespaceExists(Conflict):
    """The namespace name is taken (possibly by a deleted namespace)."""


class KeyExists(Conflict):
    """The namespace has a stored API key of that name."""


class NamespaceDeleted(Conflict):
    """The namespace is soft-deleted."""


class ReservationConflict(Conflict):
    """The reservation id is held by another entity or resource."""


class IdempotencyConflict(Conflict):
    """An acquire's idempotency key was used before with another request
    (another entity, resource or consume): a key names one request.
    Nothing was debited."""


class LeaseClosed(Conflict):
    """The lease handle has ended (committed, rolled back, or found gone
    on the server); no call was made. The server's 409 lease_closed is the
    subclass :class:`LeaseEnded`."""


class LeaseEnded(LeaseClosed):
    """409 lease_closed: the lease has ended (through any handle or server,
    or a reconciler at its expiry), and the server says how.

    Attributes:
        ended: ``"committed"``, ``"rolled_back"`` or ``"expired"`` (or ""
            from a server that does not say).
    """

    def __init__(self, message: str, *, ended: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.ended = ended


class SlotLost(LeaseClosed):
    """A slot's lease was found gone while its work ran (an extension was
    answered that the lease has ended, or that the server no longer has
    it: a reconciler took it at its expiry, another handle ended it), as Go's
    ErrSlotLost. The slot is no longer held: others may have it. The cause
    (``__cause__``) is the extension's error."""


class _LeaseGone(LeaseNotFound, LeaseClosed):
    """A lease handle's call answered 404 lease_not_found: both a
    LeaseNotFound and a LeaseClosed."""


class PreconditionFailed(TollgateError):
    """412 precondition_failed: a change made on a version (``if_match``,
    the ``version`` read) found the entity or limits at another one, as
    someone else changed them since; or, with ``if_absent``, limits were
    stored. Nothing was written: read again and decide."""


class Unavailable(TollgateError):
    """503 (or 502/504 from a proxy): the server answered, but its store
    did not; or, as :class:`ServerUnreachable`, no server answered. Either
    way no decision was made, so failing open or closed on this class
    covers both (as the Go client's ErrUnavailable does)."""


class Unimplemented(TollgateError):
    """501: the server's store does not support the call (usage, capacity)."""


class ServerError(TollgateError):
    """500 internal, or a status the API does not define."""


class ServerUnreachable(Unavailable):
    """No answer from the server: connection refused, DNS failure, TLS
    failure, timeout, or the connection dropped before the answer was read.
    For a call that writes, the outcome is unknown (a call safe to repeat
    was sent 3 times, within the client's timeout, before this). ``__cause__``
    holds the underlying exception. A kind of :class:`Unavailable`."""


class BadResponse(TollgateError):
    """The server's answer could not be read: not JSON, not the expected
    shape, or larger than MAX_RESPONSE_BYTES. No decision was received."""
