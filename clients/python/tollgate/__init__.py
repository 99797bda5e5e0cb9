"""Python client of Tollgate, the distributed rate limiter and quota broker.

Standard library only (urllib.request, asyncio, json); Python 3.9+. The operations
and errors are the Go client's (package client), over the HTTP API of
``tollgate serve`` (docs/http-api.md)::

    import tollgate

    client = tollgate.Client("http://127.0.0.1:8080")
    client.set_limits(["rpm:3", "tpm:10000/min:15000"], resource="openai/gpt-4o")
    try:
        with client.acquire("key-1", "openai/gpt-4o", {"rpm": 1, "tpm": 500}) as lease:
            used = call_the_model()
            lease.adjust({"tpm": used - 500})
    except tollgate.RateLimitExceeded as denied:
        print("retry in", denied.retry_after, "s")

From asyncio code, :class:`AsyncClient` has the same methods as coroutines
(``async with await client.acquire(...) as lease``), and ``slot()`` (of
either client) keeps a lease alive while long work runs, as Go's WithSlot.
"""

from ._abandon import (
    ABANDON_DROPPED,
    ABANDON_ENDED,
    ABANDON_FAILED,
    ABANDON_NOT_FOUND,
    MAX_ABANDONING,
    Abandoned,
)
from ._decorator import arg, rate_limit
from ._http import MAX_RESPONSE_BYTES
from .client import DEFAULT_TIMEOUT, DEFAULT_USER_AGENT, PURGE_TIMEOUT, Client
from .errors import SLOT_POLL
from .errors import __all__ as _error_names
from .errors import (
    BadResponse,
    Conflict,
    EntityExists,
    EntityNotFound,
    Forbidden,
    IdempotencyConflict,
    KeyExists,
    KeyNotFound,
    LeaseClosed,
    LeaseEnded,
    LeaseNotFound,
    NamespaceDeleted,
    NamespaceExists,
    NamespaceNotFound,
    NotFound,
    PreconditionFailed,
    RateLimitExceeded,
    ReservationConflict,
    ReservationNotFound,
    ServerError,
    ServerUnreachable,
    SlotLost,
    TollgateError,
    Unauthorized,
    Unavailable,
    Unimplemented,
    ValidationError,
)
from .lease import Lease
from ._slot import MIN_SLOT_TTL, Slot
from .aio import AsyncClient, AsyncLease, AsyncSlot
from .types import (
    ALLOW,
    BLOCK,
    AuditEvent,
    Capacity,
    CreatedKey,
    DeniedEntity,
    Entity,
    Grant,
    KeyInfo,
    LimitCapacity,
    LeaseInfo,
    LimitsConfig,
    LimitStatus,
    LimitUsage,
    Namespace,
    Reservation,
    Reserved,
    ScopedLimits,
    Usage,
    UsageSummary,
)

from ._version import __version__

__all__ = [
    "Client",
    "Lease",
    "Slot",
    "MIN_SLOT_TTL",
    "AsyncClient",
    "AsyncLease",
    "AsyncSlot",
    "LeaseInfo",
    "Abandoned",
    "ABANDON_ENDED",
    "ABANDON_NOT_FOUND",
    "ABANDON_FAILED",
    "ABANDON_DROPPED",
    "MAX_ABANDONING",
    "rate_limit",
    "arg",
    "DEFAULT_TIMEOUT",
    "DEFAULT_USER_AGENT",
    "PURGE_TIMEOUT",
    "MAX_RESPONSE_BYTES",
    "SLOT_POLL",
    "BLOCK",
    "ALLOW",
    # values
    "LimitStatus",
    "Grant",
    "Reservation",
    "Reserved",
    "Entity",
    "LimitsConfig",
    "ScopedLimits",
    "AuditEvent",
    "Namespace",
    "KeyInfo",
    "CreatedKey",
    "Usage",
    "LimitUsage",
    "UsageSummary",
    "LimitCapacity",
    "Capacity",
    "DeniedEntity",
    # errors: every name of tollgate.errors
    *_error_names,
]
