"""Values the client returns: plain dataclasses built from the wire format
(docs/http-api.md). Times are timezone-aware UTC datetimes; durations are
seconds (float) unless a name says otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional

from .errors import BadResponse, saturated_timedelta

__all__ = [
    "BLOCK",
    "ALLOW",
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
]

#: on_unavailable modes: what the server does when its store cannot answer.
BLOCK = "block"  # fail with Unavailable (the default)
ALLOW = "allow"  # grant without counting: a degraded lease


def from_ms(ms: Optional[int]) -> Optional[datetime]:
    """A Unix-milliseconds time as an aware UTC datetime; None for 0/absent."""
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


# --- decoding helpers: the answer's shape is checked, so that a server (or a
# proxy) answering something else is a BadResponse, not a KeyError.


def _obj(v: Any, what: str) -> Dict[str, Any]:
    if not isinstance(v, dict):
        raise BadResponse(f"malformed answer from the server: {what} is not a JSON object")
    return v


def _str(d: Dict[str, Any], key: str, default: str = "") -> str:
    v = d.get(key, default)
    if v is None:
        return default
    if not isinstance(v, str):
        raise BadResponse(f"malformed answer from the server: {key} is not a string")
    return v


def _int(d: Dict[str, Any], key: str, default: int = 0) -> int:
    v = d.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadResponse(f"malformed answer from the server: {key} is not an integer")
    return v


def _float(d: Dict[str, Any], key: str) -> float:
    v = d.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadResponse(f"malformed answer from the server: {key} is not a number")
    return float(v)


def _bool(d: Dict[str, Any], key: str) -> bool:
    v = d.get(key, False)
    if not isinstance(v, bool):
        raise BadResponse(f"malformed answer from the server: {key} is not a boolean")
    return v


def _list(d: Dict[str, Any], key: str) -> List[Any]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise BadResponse(f"malformed answer from the server: {key} is not a list")
    return v


def _counts(d: Dict[str, Any], key: str) -> Dict[str, int]:
    v = d.get(key)
    if v is None:
        return {}
    v = _obj(v, key)
    out: Dict[str, int] = {}
    for k, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int):
            raise BadResponse(f"malformed answer from the server: {key}.{k} is not an integer")
        out[k] = n
    return out


def _strmap(d: Dict[str, Any], key: str) -> Dict[str, str]:
    v = d.get(key)
    if v is None:
        return {}
    v = _obj(v, key)
    if not all(isinstance(x, str) for x in v.values()):
        raise BadResponse(f"malformed answer from the server: {key} holds a value that is not a string")
    return dict(v)


@dataclass(frozen=True)
class LimitStatus:
    """One limit of one bucket, as an acquire, a denial or available() saw it."""

    entity: str
    resource: str
    limit: str
    kind: str  # "rate", "concurrency" or "reserved"
    capacity: int
    available: int  # after refill (and, in a grant, after the debit); negative in debt
    requested: int
    exceeded: bool
    retry_after_ms: int  # exact however long (up to 2^63-1)
    #: For an exceeded concurrency or reserved limit: "expiry" (retry_after
    #: is the earliest expiry among its holders) or "release" (no time is
    #: known); "" for a rate limit.
    waits: str = ""
    #: The limit is enforced in shadow (its configuration's ``shadow``):
    #: exceeded, it would have denied, and did not.
    shadow: bool = False
    #: The level that supplied the limit: "entity", "entity-default",
    #: "resource", "system", or "call" (the request's own limits); "" when
    #: the server does not say.
    source: str = ""
    #: For a calendar quota (``tok:1000000/month@UTC``): when its current
    #: window ends and it refills, in Unix milliseconds; 0 for other limits.
    resets_at_ms: int = 0
    #: The span ``capacity`` is granted over, in milliseconds: for a rate
    #: limit the time its refill takes to fill it from empty (60000 for
    #: ``rpm:100/min``), for a calendar quota its current window's length;
    #: 0 for concurrency and reserved limits.
    window_ms: int = 0

    @property
    def denies(self) -> bool:
        """Whether this status refused its request: exceeded, not in shadow."""
        return self.exceeded and not self.shadow

    @property
    def retry_after(self) -> float:
        """Seconds refill alone needs to cover ``requested``; 0 unless exceeded.
        For a concurrency or reserved limit a hint, as ``waits`` says."""
        return self.retry_after_ms / 1000.0

    @property
    def retry_after_timedelta(self) -> timedelta:
        """retry_after as a timedelta, saturated at timedelta.max."""
        return saturated_timedelta(self.retry_after_ms)

    @property
    def resets_at(self) -> Optional[datetime]:
        """For a calendar quota, when its current window ends (an aware UTC
        datetime); None for other limits."""
        return from_ms(self.resets_at_ms)

    @classmethod
    def from_json(cls, v: Any) -> "LimitStatus":
        d = _obj(v, "limit status")
        return cls(
            entity=_str(d, "entity"),
            resource=_str(d, "resource"),
            limit=_str(d, "limit"),
            kind=_str(d, "kind"),
            capacity=_int(d, "capacity"),
            available=_int(d, "available"),
            requested=_int(d, "requested"),
            exceeded=_bool(d, "exceeded"),
            retry_after_ms=min(max(0, _int(d, "retry_after_ms")), (1 << 63) - 1),
            waits=_str(d, "waits"),
            shadow=_bool(d, "shadow"),
            source=_str(d, "source"),
            resets_at_ms=max(0, _int(d, "resets_at_ms")),
            window_ms=max(0, _int(d, "window_ms")),
        )


def statuses(d: Dict[str, Any], key: str = "limits") -> List[LimitStatus]:
    return [LimitStatus.from_json(x) for x in _list(d, key)]


@dataclass(frozen=True)
class Grant:
    """The outcome of acquire_and_commit: what was consumed (what was asked,
    once per limit; each cascade level's debit is in ``statuses``) and every
    limit just after.

    ``replayed`` is True when the answer was the grant of an earlier call
    with the same idempotency key (a retry after a lost answer), given
    again: nothing was debited this time, and ``statuses`` is empty."""

    consumed: Dict[str, int]
    statuses: List[LimitStatus]
    degraded: bool = False  # granted without the store (mode "allow"): nothing counted
    replayed: bool = False


@dataclass(frozen=True)
class Reservation:
    """A reserved resource id."""

    id: str
    entity: str
    resource: str
    holder: str = ""  # the server process that made it (host/pid)
    created_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None  # None: until released

    @classmethod
    def _fields(cls, d: Dict[str, Any]) -> Dict[str, Any]:
        return dict(
            id=_str(d, "id"),
            entity=_str(d, "entity"),
            resource=_str(d, "resource"),
            holder=_str(d, "holder"),
            created_at=from_ms(_int(d, "created_at_ms")),
            expires_at=from_ms(_int(d, "expires_at_ms")),
        )

    @classmethod
    def from_json(cls, v: Any) -> "Reservation":
        return cls(**cls._fields(_obj(v, "reservation")))


@dataclass(frozen=True)
class LeaseInfo:
    """An open durable lease, as GET /v1/leases lists it."""

    lease_id: str
    entity: str
    resource: str
    holder: str = ""  # the process that acquired it (host/pid)
    created_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None  # None: never
    consumed: Dict[str, int] = field(default_factory=dict)  # what was asked, once per limit, pending adjustments included

    @classmethod
    def from_json(cls, v: Any) -> "LeaseInfo":
        d = _obj(v, "lease")
        return cls(
            lease_id=_str(d, "lease_id"),
            entity=_str(d, "entity"),
            resource=_str(d, "resource"),
            holder=_str(d, "holder"),
            created_at=from_ms(_int(d, "created_at_ms")),
            expires_at=from_ms(_int(d, "expires_at_ms")),
            consumed=_counts(d, "consumed"),
        )


@dataclass(frozen=True)
class Reserved(Reservation):
    """The outcome of reserve(): the reservation and what the call consumed.

    ``new`` is False when the same entity and resource held the id already
    (the server answered 200, not 201): nothing was debited again and
    ``statuses`` is empty."""

    new: bool = True
    consumed: Dict[str, int] = field(default_factory=dict)
    statuses: List[LimitStatus] = field(default_factory=list)
    degraded: bool = False  # nothing reserved: the store did not answer, mode "allow"

    @classmethod
    def from_answer(cls, v: Any, new: bool) -> "Reserved":
        d = _obj(v, "reservation")
        return cls(
            **cls._fields(d),
            new=new,
            consumed=_counts(d, "consumed"),
            statuses=statuses(d),
            degraded=_bool(d, "degraded"),
        )


@dataclass(frozen=True)
class Entity:
    """Something limits apply to (an API key, a project, an organisation),
    in a tree through parent_id."""

    id: str
    name: str = ""
    parent_id: str = ""
    cascade: bool = False  # acquires also debit the parent's buckets
    metadata: Dict[str, str] = field(default_factory=dict)
    created_at: Optional[datetime] = None  # set by the server
    #: Counts the entity's changes (1 when created), set by the server:
    #: what ``update_entity(if_match=...)`` and ``delete_entity`` take.
    version: int = 0

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": self.id}
        if self.name:
            d["name"] = self.name
        if self.parent_id:
            d["parent_id"] = self.parent_id
        if self.cascade:
            d["cascade"] = True
        if self.metadata:
            d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_json(cls, v: Any) -> "Entity":
        d = _obj(v, "entity")
        return cls(
            id=_str(d, "id"),
            name=_str(d, "name"),
            parent_id=_str(d, "parent_id"),
            cascade=_bool(d, "cascade"),
            metadata=_strmap(d, "metadata"),
            created_at=from_ms(_int(d, "created_at_ms")),
            version=_int(d, "version"),
        )


@dataclass(frozen=True)
class LimitsConfig:
    """The limits stored at one level, in canonical form (``rpm:100/min``).
    on_unavailable is set at the system level only."""

    limits: List[str]
    on_unavailable: Optional[str] = None
    #: The limits enforced in shadow: debited, never denying.
    shadow: List[str] = field(default_factory=list)
    #: Counts the puts of the level's limits (1 when stored where none
    #: were), set by the server: what ``set_limits(if_match=...)`` takes.
    version: int = 0
    #: The alert thresholds: fractions of capacity, ascending.
    alert_at: List[float] = field(default_factory=list)

    @classmethod
    def from_json(cls, v: Any) -> "LimitsConfig":
        d = _obj(v, "limits")
        limits = _list(d, "limits")
        shadow = _list(d, "shadow") if d.get("shadow") is not None else []
        if not all(isinstance(x, str) for x in limits + shadow):
            raise BadResponse("malformed answer from the server: limits holds a value that is not a string")
        alert_at = _list(d, "alert_at") if d.get("alert_at") is not None else []
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in alert_at):
            raise BadResponse("malformed answer from the server: alert_at holds a value that is not a number")
        return cls(limits=list(limits), on_unavailable=_str(d, "on_unavailable") or None, shadow=list(shadow),
                   alert_at=[float(x) for x in alert_at], version=_int(d, "version"))


@dataclass(frozen=True)
class ScopedLimits:
    """One stored configuration in a listing (list_limits) and its level:
    entity and resource both empty for the system's, resource alone for a
    resource's, entity with resource ("_default_" for the entity default)
    for an entity's. on_unavailable is set at the system level only."""

    entity: str = ""
    resource: str = ""
    limits: List[str] = field(default_factory=list)
    on_unavailable: Optional[str] = None
    shadow: List[str] = field(default_factory=list)
    version: int = 0
    alert_at: List[float] = field(default_factory=list)

    @property
    def config(self) -> LimitsConfig:
        """The limits alone, as get_limits returns them."""
        return LimitsConfig(limits=list(self.limits), on_unavailable=self.on_unavailable, shadow=list(self.shadow),
                            alert_at=list(self.alert_at), version=self.version)

    @classmethod
    def from_json(cls, v: Any) -> "ScopedLimits":
        d = _obj(v, "limits config")
        cfg = LimitsConfig.from_json(d)
        return cls(entity=_str(d, "entity"), resource=_str(d, "resource"), limits=cfg.limits,
                   on_unavailable=cfg.on_unavailable, shadow=cfg.shadow, alert_at=cfg.alert_at, version=cfg.version)


@dataclass(frozen=True)
class AuditEvent:
    id: str
    time: Optional[datetime]
    action: str  # entity.create, entity.delete, config.set, config.delete, limit.penalize...
    entity: str = ""
    resource: str = ""
    principal: str = ""
    details: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, v: Any) -> "AuditEvent":
        d = _obj(v, "audit event")
        return cls(
            id=_str(d, "id"),
            time=from_ms(_int(d, "time_ms")),
            action=_str(d, "action"),
            entity=_str(d, "entity"),
            resource=_str(d, "resource"),
            principal=_str(d, "principal"),
            details=_strmap(d, "details"),
        )


@dataclass(frozen=True)
class Namespace:
    name: str
    id: str = ""
    created_at: Optional[datetime] = None
    deleted_at: Optional[datetime] = None  # set while soft-deleted

    @classmethod
    def from_json(cls, v: Any) -> "Namespace":
        d = _obj(v, "namespace")
        return cls(
            name=_str(d, "name"),
            id=_str(d, "id"),
            created_at=from_ms(_int(d, "created_at_ms")),
            deleted_at=from_ms(_int(d, "deleted_at_ms")),
        )


@dataclass(frozen=True)
class KeyInfo:
    """A stored API key, as list_keys lists it: never its secret, nor its
    hash."""

    name: str
    namespace: str = ""
    role: str = ""  # "acquire", "read" or "admin"
    entity: str = ""  # "": not confined; else the key acts on this entity and its descendants only
    allow_limits: bool = False  # it may send its own limits, and on_unavailable "allow"
    created_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None  # None: until revoked

    @classmethod
    def _fields(cls, d: Dict[str, Any]) -> Dict[str, Any]:
        return dict(
            name=_str(d, "name"),
            namespace=_str(d, "namespace"),
            role=_str(d, "role"),
            entity=_str(d, "entity"),
            allow_limits=_bool(d, "allow_limits"),
            created_at=from_ms(_int(d, "created_at_ms")),
            expires_at=from_ms(_int(d, "expires_at_ms")),
        )

    @classmethod
    def from_json(cls, v: Any) -> "KeyInfo":
        return cls(**cls._fields(_obj(v, "key")))


@dataclass(frozen=True)
class CreatedKey(KeyInfo):
    """The outcome of create_key: the key, and its secret in ``key`` (send
    it as ``Client(..., api_key=created.key)``). The server keeps only a
    hash: the secret is shown this once. It is left out of repr() so that
    logging the value does not leak it."""

    key: str = field(default="", repr=False)

    @property
    def info(self) -> KeyInfo:
        """The key without its secret, as list_keys lists it."""
        return KeyInfo(name=self.name, namespace=self.namespace, role=self.role, entity=self.entity,
                       allow_limits=self.allow_limits, created_at=self.created_at, expires_at=self.expires_at)

    @classmethod
    def from_json(cls, v: Any) -> "CreatedKey":
        d = _obj(v, "created key")
        secret = _str(d, "key")
        if not secret:
            raise BadResponse("malformed answer from the server: the created key has no secret (key)")
        return cls(**cls._fields(d), key=secret)


@dataclass(frozen=True)
class Usage:
    """Net tokens consumed of each limit by an entity on a resource in one
    hour or day window, and the number of acquires."""

    entity: str
    resource: str
    window: str  # "hour" or "day"
    start: Optional[datetime]
    consumed: Dict[str, int]
    events: int

    @classmethod
    def from_json(cls, v: Any) -> "Usage":
        d = _obj(v, "usage")
        return cls(
            entity=_str(d, "entity"),
            resource=_str(d, "resource"),
            window=_str(d, "window"),
            start=from_ms(_int(d, "start_ms")),
            consumed=_counts(d, "consumed"),
            events=_int(d, "events"),
        )


@dataclass(frozen=True)
class LimitUsage:
    total: int
    average_per_window: float
    peak: int
    peak_start: Optional[datetime]


@dataclass(frozen=True)
class UsageSummary:
    windows: int
    events: int
    limits: Dict[str, LimitUsage]

    @classmethod
    def from_json(cls, v: Any) -> "UsageSummary":
        d = _obj(v, "usage summary")
        limits = {}
        for name, lv in _obj(d.get("limits") or {}, "limits").items():
            ld = _obj(lv, "limits." + name)
            limits[name] = LimitUsage(
                total=_int(ld, "total"),
                average_per_window=_float(ld, "average_per_window"),
                peak=_int(ld, "peak"),
                peak_start=from_ms(_int(ld, "peak_start_ms")),
            )
        return cls(windows=_int(d, "windows"), events=_int(d, "events"), limits=limits)


@dataclass(frozen=True)
class LimitCapacity:
    limit: str
    kind: str
    capacity: int
    available: int
    utilisation: float


@dataclass(frozen=True)
class Capacity:
    """A resource's capacity and use, summed over its buckets."""

    resource: str
    entities: int
    limits: List[LimitCapacity]

    @classmethod
    def from_json(cls, v: Any) -> "Capacity":
        d = _obj(v, "capacity")
        limits = []
        for lv in _list(d, "limits"):
            ld = _obj(lv, "limit capacity")
            limits.append(
                LimitCapacity(
                    limit=_str(ld, "limit"),
                    kind=_str(ld, "kind"),
                    capacity=_int(ld, "capacity"),
                    available=_int(ld, "available"),
                    utilisation=_float(ld, "utilisation"),
                )
            )
        return cls(resource=_str(d, "resource"), entities=_int(d, "entities"), limits=limits)


@dataclass(frozen=True)
class DeniedEntity:
    """An entity a limit of a resource refused, with how often (top_denied):
    ``count`` is at most ``error`` over the true number."""

    entity: str
    resource: str
    limit: str
    count: int
    error: int = 0

    @classmethod
    def from_json(cls, v: Any) -> "DeniedEntity":
        d = _obj(v, "denied entity")
        return cls(entity=_str(d, "entity"), resource=_str(d, "resource"), limit=_str(d, "limit"),
                   count=_int(d, "count"), error=_int(d, "error"))
