"""Client: calls one Tollgate server (docs/http-api.md)."""

from __future__ import annotations

import math
import ssl
import time
import urllib.parse
import warnings
from datetime import datetime
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import errors as E
from ._version import __version__
from ._http import Answer, Query, Transport, seg
from ._abandon import ABANDON_TIMEOUT, Abandoned, Abandoner, unknown_outcome
from ._util import Duration, consume_body, limits_list, namespace, new_idempotency_key, penalty_body, seconds, ttl_ms, unix_ms_ceil, unix_ms_floor
from ._util import idempotency_key as _idempotency_key
from ._util import on_unavailable as _mode
from ._decorator import arg, rate_limit
from .lease import Lease
from ._wake import Releases
from ._slot import Slot, sync_slot
from ._calls import (
    V1,
    _available_query,
    _leases_page,
    _page_query,
    _reservations_page,
    _reserve_body,
    _reset_body,
    _until_answer,
    _until_query,
    lease_path,
)

from .types import (
    AuditEvent,
    Capacity,
    DeniedEntity,
    CreatedKey,
    Entity,
    Grant,
    KeyInfo,
    LeaseInfo,
    LimitsConfig,
    LimitStatus,
    Namespace,
    Reservation,
    Reserved,
    ScopedLimits,
    Usage,
    UsageSummary,
    _counts,
    _list,
    _obj,
    _str,
    statuses,
)

__all__ = ["Client", "DEFAULT_TIMEOUT", "DEFAULT_USER_AGENT", "PURGE_TIMEOUT"]

#: Bounds each call, including reading the answer (seconds).
DEFAULT_TIMEOUT = 10.0
#: How long purge_namespace waits by default: the server gives a purge up to
#: 10 minutes.
PURGE_TIMEOUT = 660.0
DEFAULT_USER_AGENT = "tollgate-python-client/" + __version__

#: The roles of an API key, for create_key.
_ROLES = ("acquire", "read", "admin")

#: The longest principal the server records, in bytes (UTF-8).
MAX_PRINCIPAL_LEN = 256
PRINCIPAL_HEADER = "X-Tollgate-Principal"

F = TypeVar("F", bound=Callable[..., Any])


def _base_url(raw: str) -> str:
    u = urllib.parse.urlsplit(raw) if isinstance(raw, str) else None
    if u is None or u.scheme not in ("http", "https"):
        raise E.ValidationError("invalid base_url: want an http:// or https:// URL", field="base_url", value=str(raw)[:80])
    if not u.netloc:
        raise E.ValidationError("invalid base_url: no host", field="base_url", value=raw[:80])
    if u.query or u.fragment:
        raise E.ValidationError("invalid base_url: no query or fragment allowed", field="base_url", value=raw[:80])
    return raw.rstrip("/")


class Client:
    """Calls one Tollgate server. Safe for concurrent use from threads.

    Args:
        base_url: e.g. "http://127.0.0.1:8080" (a path, if any, prefixes
            every endpoint).
        api_key: sent as "Authorization: Bearer KEY" (servers with --keys).
        namespace: every call works in this namespace (X-Tollgate-Namespace);
            without it the server uses "default", or the API key's namespace.
        timeout: bounds each call in seconds (default 10); None for no bound.
        principal: recorded as the author of changes in audit events when the
            server has no API keys (X-Tollgate-Principal). Every call that
            writes an audited change also takes ``principal=``, which
            replaces this one for that call (a server with API keys records
            the key's name instead).
        user_agent: the User-Agent header.
        ssl_context: for https servers with a private CA, client certificates.
        proxies: as urllib.request.ProxyHandler; None takes them from the
            environment (http_proxy...), except for loopback servers, which
            are never proxied; {} uses none.
        idempotency_keys: False stops the client sending an idempotency key
            of its own with each acquire (one the caller gives is still
            sent). Without a key a repeated acquire may be granted twice, so
            the client then sends none again after a lost answer.
        on_abandon: called with an :class:`~tollgate.Abandoned` for every
            acquire of unknown outcome the client abandons, when its
            rollbacks end, on a thread of its own: to log them, or, in
            tests, to know when they end (see below).

    Calls that are safe to repeat are sent again when no answer comes back
    (the connection was refused or reset, or the answer broke off), up to 3
    times in all, pausing 50 ms and then 200 ms, within ``timeout``: an
    acquire carrying an idempotency key (the client's own, one per call,
    unless the caller gives one), a lease's commit, rollback, extend and
    penalize, and reads; never an adjust, which adds up.

    An acquire (or acquire_and_commit, or wait's attempts) that may have
    been granted without its caller learning it holds tokens, or a slot,
    for a lease nobody holds: the server answered 5xx, or a grant that
    says ``degraded`` (its store failed, its write may have landed), or an
    answer the client could not read, or none came back whole (after the
    retries, or at the timeout). When the client made its idempotency key
    up itself, nobody will send it again: the client rolls that lease back
    in the background (its id is the key's), at once and again 1, 5 and
    30 s after while the server finds no such lease (the write may land
    late) or does not answer; at most 64 at once per client, one more is
    reported ``dropped`` and left to the server's reconciler. A key the
    caller gave is left alone: the caller may send it again, and must find
    the first grant.

    Bad arguments raise :class:`~tollgate.ValidationError` before any call.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        namespace: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        *,
        principal: Optional[str] = None,
        user_agent: str = DEFAULT_USER_AGENT,
        ssl_context: Optional[ssl.SSLContext] = None,
        proxies: Optional[Dict[str, str]] = None,
        idempotency_keys: bool = True,
        on_abandon: Optional[Callable[[Abandoned], Any]] = None,
    ) -> None:
        self.base_url = _base_url(base_url)
        self.namespace = _namespace_opt(namespace)
        if timeout is not None and seconds(timeout, "timeout") <= 0:
            raise E.ValidationError("invalid timeout: must be positive, or None", field="timeout", value=str(timeout))
        self.timeout = None if timeout is None else seconds(timeout, "timeout")
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        if api_key:
            headers["Authorization"] = "Bearer " + api_key
        if self.namespace:
            headers["X-Tollgate-Namespace"] = self.namespace
        if principal:
            headers[PRINCIPAL_HEADER] = _header_value(principal)
        self._http = Transport(self.base_url, headers, self.timeout, ssl_context, proxies)
        self._keys = bool(idempotency_keys)
        self._releases = Releases()
        self._abandoner = Abandoner(self._roll_back_abandoned, on_abandon)

    def __repr__(self) -> str:
        return f"Client({self.base_url!r}, namespace={self.namespace!r})"

    def _call(self, method: str, path: str, *, query: Query = None, body: Any = None,
              timeout: Optional[float] = None, route: str = "", retry: Optional[bool] = None,
              principal: Optional[str] = None, if_match: Optional[int] = None,
              if_absent: bool = False) -> Tuple[int, Any]:
        """Send a request; principal, unless None or empty, replaces the
        client's X-Tollgate-Principal for this call; if_match (a version)
        and if_absent send If-Match and If-None-Match: *."""
        headers = _principal_header(principal)
        pre = _precondition_headers(if_match, if_absent)
        if pre:
            headers = {**(headers or {}), **pre}
        a = self._http.send(method, path, query=query, body=body, timeout=timeout, route=route, retry=retry,
                            headers=headers)
        return a.status, a.data

    # ------------------------------------------------------------------
    # Acquire and leases

    def _acquire_call(self, entity: str, resource: str, consume: Mapping[str, int], commit: bool,
                      limits: Optional[Sequence[str]], mode: Optional[str], lease_ttl: Optional[Duration],
                      key: Optional[str]) -> Dict[str, Any]:
        """The arguments of Transport.send for POST /v1/acquire (shared with
        AsyncClient): validated, with the idempotency key to send."""
        if key is not None:
            key = _idempotency_key(key)
        elif self._keys:
            key = new_idempotency_key()
        body: Dict[str, Any] = {"entity": entity, "resource": resource, "consume": consume_body(consume)}
        lim = limits_list(limits)
        if lim is not None:
            if not lim:
                raise E.ValidationError("invalid limits: give at least one limit, or None for the stored ones", field="limits")
            body["limits"] = lim
        if commit:
            body["commit"] = True
        m = _mode(mode)
        if m:
            body["on_unavailable"] = m
        ms = ttl_ms(lease_ttl, "lease_ttl_ms")
        if ms is not None and not commit:
            body["lease_ttl_ms"] = ms
        return dict(method="POST", path=V1 + "/acquire", body=body,
                    headers={"Idempotency-Key": key} if key else None, retry=key is not None)

    @staticmethod
    def _acquired(a: Answer) -> Tuple[Dict[str, Any], bool]:
        """An acquire's answer: (its body, whether it replays an earlier
        grant of the same idempotency key)."""
        return _obj(a.data, "acquire answer"), a.headers.get("Idempotent-Replayed", "") == "true"

    def _acquire(self, entity: str, resource: str, consume: Mapping[str, int], commit: bool,
                 limits: Optional[Sequence[str]], mode: Optional[str], lease_ttl: Optional[Duration],
                 key: Optional[str]) -> Tuple[Dict[str, Any], bool]:
        """POST /v1/acquire: (the answer, whether it replays an earlier
        grant of the same idempotency key)."""
        call = self._acquire_call(entity, resource, consume, commit, limits, mode, lease_ttl, key)
        mine = _own_key(call, key)
        try:
            answer, replayed = self._acquired(self._http.send(call.pop("method"), call.pop("path"), **call))
        except E.TollgateError as err:
            if mine and unknown_outcome(err):
                self._abandoner.abandon(mine, entity, resource)  # granted unseen, maybe: see _abandon.py
            raise
        if mine and answer.get("degraded") is True:
            self._abandoner.abandon(mine, entity, resource)
        return answer, replayed

    def _roll_back_abandoned(self, lease_id: str) -> None:
        """Send the rollback of an abandoned acquire's lease once (with
        the transport's own retries), bounded by the client's timeout."""
        self._http.send("POST", lease_path(lease_id, "rollback"), route="lease", retry=True,
                        timeout=self.timeout if self.timeout is not None else ABANDON_TIMEOUT)

    def acquire(
        self,
        entity: str,
        resource: str,
        consume: Mapping[str, int],
        *,
        limits: Optional[Sequence[str]] = None,
        on_unavailable: Optional[str] = None,
        lease_ttl: Optional[Duration] = None,
        idempotency_key: Optional[str] = None,
    ) -> Lease:
        """Check and debit consume (limit name -> whole tokens) against every
        limit in effect for entity and resource and their cascade ancestors,
        all or nothing, and return the :class:`Lease`: adjust it, then commit
        or roll it back (or use it as a context manager).

        Args:
            limits: limit strings (["rpm:60", "inflight:5/concurrent"]) used
                instead of the stored configuration for this call.
            on_unavailable: "block" or "allow": what the server does if its
                store cannot answer ("allow" grants a degraded lease).
            lease_ttl: how long the lease lives unless extended (seconds or
                timedelta, 1 s to 24 h; default the server's, 5 minutes).
            idempotency_key: names this request (1 to 255 printable ASCII
                characters): the same key in the namespace, while the lease
                is remembered (its expiry, and at least 10 minutes after it
                ended), answers this grant again and debits once. Default:
                a key of the client's own for this call (unless the client
                was made with ``idempotency_keys=False``). The client sends
                the acquire again with its key when the answer is lost, and
                the lease of an answer that replays the first grant reports
                ``replayed``.

        Raises:
            RateLimitExceeded: denied; nothing was consumed.
            ValidationError: bad input, or an amount above a limit's capacity.
            IdempotencyConflict: the key was used with another request.
            LeaseEnded: the lease the key was granted has ended since.
            Unavailable, ServerUnreachable: no decision (outcome unknown;
                with a key of the client's own, the client rolls back the
                lease it may have granted: see :class:`Client`).
        """
        answer, replayed = self._acquire(entity, resource, consume, False, limits, on_unavailable, lease_ttl,
                                         idempotency_key)
        lease = Lease(self, entity, resource, answer)
        lease.replayed = replayed
        return lease

    def acquire_and_commit(
        self,
        entity: str,
        resource: str,
        consume: Mapping[str, int],
        *,
        limits: Optional[Sequence[str]] = None,
        on_unavailable: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Grant:
        """Acquire and commit in one call, for work whose cost is known up
        front; no lease is kept. idempotency_key is acquire()'s: the same
        key again within 10 minutes answers this grant again (``replayed``,
        statuses empty) and debits once. Errors are those of acquire()."""
        d, replayed = self._acquire(entity, resource, consume, True, limits, on_unavailable, None, idempotency_key)
        return Grant(consumed=_counts(d, "consumed"), statuses=statuses(d), degraded=bool(d.get("degraded", False)),
                     replayed=replayed)

    def wait(
        self,
        entity: str,
        resource: str,
        consume: Mapping[str, int],
        max_wait: Duration,
        *,
        limits: Optional[Sequence[str]] = None,
        on_unavailable: Optional[str] = None,
        lease_ttl: Optional[Duration] = None,
    ) -> Lease:
        """Acquire like acquire(), but when denied sleep and try again, for at
        most max_wait (seconds or timedelta). The sleep is the denial's
        backoff() (RateLimitExceeded.backoff): a rate limit's retry_after,
        exactly; for a concurrency or reserved limit, which a holder may
        give back at any time, about a second (SLOT_POLL), or the earliest
        expiry among its holders if sooner, so a waiter costs about one call
        a second. When refill could not grant it within max_wait, the last
        RateLimitExceeded is raised at once rather than sleeping in vain; a
        wait for a slot tries once more at max_wait, then raises. Other
        errors are raised as they occur. Each attempt is bounded by the
        client's timeout on its own. A lease of this client that gives back
        the slot waited for (its commit or rollback) wakes the wait at
        once."""
        deadline = time.monotonic() + max(0.0, seconds(max_wait, "max_wait"))
        self._releases.enter(entity, resource)
        try:
            while True:
                seq = self._releases.seq(entity, resource)
                try:
                    return self.acquire(entity, resource, consume, limits=limits,
                                        on_unavailable=on_unavailable, lease_ttl=lease_ttl)
                except E.RateLimitExceeded as denied:
                    sleep, least = denied.backoff()
                    left = deadline - time.monotonic()
                    if left <= 0 or least > left:
                        raise
                    if denied.waits:  # a slot: a lease of this client giving it back wakes the wait
                        self._releases.sleep(entity, resource, seq, min(sleep, left))
                    else:
                        time.sleep(min(sleep, left))
        finally:
            self._releases.leave(entity, resource)

    def _released(self, entity: str, resource: str) -> None:
        """A lease of this client gave back slots of entity and resource."""
        self._releases.released(entity, resource)

    def slot(
        self,
        entity: str,
        resource: str,
        consume: Mapping[str, int],
        *,
        wait: Optional[Duration] = None,
        limits: Optional[Sequence[str]] = None,
        on_unavailable: Optional[str] = None,
        lease_ttl: Optional[Duration] = None,
    ) -> "Slot":
        """Hold a slot (a lease: typically one of a concurrency limit, and
        the call's rate limits) while a block runs, keeping it alive, as Go's
        WithSlot::

            with client.slot("key-1", "batch", {"jobs": 1}, wait=60) as lease:
                run_a_long_job()   # may outlast the lease's expiry

        Acquire (or, with wait, wait up to that long), extend the lease by its
        expiry (lease_ttl, or the server's) every half expiry from a
        background thread while the block runs, then commit, or roll back if
        the block raises. If an extension finds the lease gone,
        ``lease.closed`` turns True and leaving the block raises SlotLost.
        See :class:`tollgate.Slot`."""
        return sync_slot(self, entity, resource, consume, wait=wait, limits=limits, on_unavailable=on_unavailable,
                         lease_ttl=lease_ttl)

    def available(self, entity: str, resource: str, *, limits: Optional[Sequence[str]] = None) -> List[LimitStatus]:
        """The current state of every limit in effect for entity and resource
        and their cascade ancestors, after refill; writes nothing."""
        _, answer = self._call("GET", V1 + "/available", query=_available_query(entity, resource, limits))
        return statuses(_obj(answer, "available answer"))

    def time_until_available(
        self, entity: str, resource: str, consume: Mapping[str, int], *, limits: Optional[Sequence[str]] = None
    ) -> float:
        """How long, in seconds, refill alone needs before acquire with the
        same arguments could succeed (0 if it could now); writes nothing.
        As the Go library's TimeUntilAvailable."""
        _, answer = self._call("GET", V1 + "/available", query=_until_query(entity, resource, consume, limits))
        return _until_answer(answer)

    def resume_lease(self, lease_id: str) -> Lease:
        """A handle on an open lease by its id, e.g. one another process
        acquired: any server over the same store serves it (as the Go
        client's ResumeLease). Its statuses are empty (the server keeps only
        what the lease consumed). Raises LeaseEnded (ended says how) if the
        lease has ended, LeaseNotFound if the server never granted it here,
        has forgotten it, or its expiry has passed."""
        d = _obj(self._lease_call("GET", lease_id, None), "lease")
        return Lease(self, _str(d, "entity"), _str(d, "resource"), d)

    def get_lease(self, lease_id: str) -> Lease:
        """Deprecated: use resume_lease, which this calls (kept for one
        release; it warns with a DeprecationWarning)."""
        warnings.warn("Client.get_lease is deprecated: use resume_lease", DeprecationWarning, stacklevel=2)
        return self.resume_lease(lease_id)

    def _lease_call(self, method: str, lease_id: str, action: Optional[str], body: Any = None,
                    principal: Optional[str] = None) -> Any:
        _, answer = self._call(method, lease_path(lease_id, action), body=body, route="lease",
                               retry=action != "adjust", principal=principal)  # an adjust adds up
        return answer

    # ------------------------------------------------------------------
    # Reservations and penalties

    def reserve(
        self,
        entity: str,
        resource: str,
        id: str,
        consume: Optional[Mapping[str, int]] = None,
        *,
        limits: Optional[Sequence[str]] = None,
        on_unavailable: Optional[str] = None,
        ttl: Optional[Duration] = None,
        principal: Optional[str] = None,
    ) -> Reserved:
        """Reserve resource id (an EMR cluster, a GPU job) for entity and
        resource: take 1 of each reserved limit consume names (None: 1 of
        every reserved limit in effect) and debit its other limits, all or
        nothing. ttl (seconds or timedelta) gives the reservation an expiry;
        without it it lasts until released.

        The same id held by the same entity and resource is the same
        reservation (``Reserved.new`` is False, nothing debited again); held
        by another it raises ReservationConflict. A full reserved limit
        raises RateLimitExceeded. principal, if given, is recorded in the
        reservation.reserve audit event instead of the client's."""
        body = _reserve_body(entity, resource, id, consume, limits, on_unavailable, ttl)
        status, answer = self._call("POST", V1 + "/reservations", body=body, route="reservation", principal=principal)
        return Reserved.from_answer(answer, new=(status == 201))

    def release(self, id: str, *, principal: Optional[str] = None) -> None:
        """End the reservation of resource id, whoever holds it: its reserved
        tokens come back. Raises ReservationNotFound (a LeaseNotFound) if the
        id holds none; a caller releasing on a repeated event can treat that
        as done. principal, if given, is recorded in the audit event instead
        of the client's."""
        self._call("DELETE", V1 + "/reservations/" + seg(id), route="reservation", principal=principal)

    def get_reservation(self, id: str) -> Reservation:
        """The reservation of resource id, found by the id alone; raises
        ReservationNotFound if there is none."""
        _, answer = self._call("GET", V1 + "/reservations/" + seg(id), route="reservation")
        return Reservation.from_json(answer)

    def list_reservations(self, entity: str, resource: Optional[str] = None, *, after: Optional[str] = None,
                          limit: int = 100) -> Tuple[List[Reservation], Optional[str]]:
        """One page of entity's reservations (of one resource if given),
        sorted by id: (reservations, next), where next is the ``after`` of
        the following page, or None on the last page. limit: 1 to 1000."""
        q = _page_query(entity=entity, resource=resource, after=after, limit=limit)
        _, answer = self._call("GET", V1 + "/reservations", query=q, route="reservation")
        return _reservations_page(answer)

    def list_leases(self, entity: Optional[str] = None, resource: Optional[str] = None, *, after: Optional[str] = None,
                    limit: int = 100) -> Tuple[List[LeaseInfo], Optional[str]]:
        """One page of the namespace's open durable leases (every lease the
        server hands out is durable), of one entity and then of one of its
        resources if given, sorted by id: (leases, next), where next is the
        ``after`` of the following page, or None on the last page. limit: 1
        to 1000. Reservations are listed by list_reservations."""
        _, answer = self._call("GET", V1 + "/leases", query=_page_query(entity=entity, resource=resource, after=after,
                                                                         limit=limit))
        return _leases_page(answer)

    def iter_reservations(self, entity: str, resource: Optional[str] = None, *, page_size: int = 100) -> Iterator[Reservation]:
        """Every reservation of entity (of one resource if given), a page at a time."""
        after: Optional[str] = None
        while True:
            page, after = self.list_reservations(entity, resource, after=after, limit=page_size)
            yield from page
            if not after:
                return

    def penalize(
        self,
        entity: str,
        resource: str,
        limits: Sequence[str],
        *,
        retry_after: Optional[Duration] = None,
        until: Optional[datetime] = None,
        reason: str = "",
        principal: Optional[str] = None,
    ) -> None:
        """Empty the named rate limits of entity and resource for retry_after
        (seconds or timedelta, from the server's clock: pass the vendor's
        Retry-After as it came) or until a time (at most 24 h ahead), for
        every process sharing the server's store: what to do when a vendor
        answers 429. Acquires before then raise RateLimitExceeded. Recorded
        in the audit log (``limit.penalize``) with reason and principal (if
        given, instead of the client's)."""
        self._penalize_body(entity, resource, penalty_body(limits, retry_after, until, reason), principal)

    def _penalize_body(self, entity: str, resource: str, body: Dict[str, Any], principal: Optional[str] = None) -> None:
        self._call("POST", V1 + "/penalize", body=dict(body, entity=entity, resource=resource), principal=principal)

    def reset(self, entity: str, resource: str, *, limits: Optional[Sequence[str]] = None, reason: str = "",
              principal: Optional[str] = None) -> None:
        """Refill rate limits of entity's bucket for resource to capacity,
        for every process sharing the server's store: lift a penalty, forgive
        debt and consumption. limits names the limits to refill (None: every
        refilling limit the bucket holds); a concurrency or reserved limit,
        or one the bucket does not hold, raises ValidationError (field
        "limits"). Only the entity's own bucket is refilled, not its cascade
        ancestors'. Recorded in the audit log (``limit.reset``) with reason
        and principal (if given, instead of the client's). With API keys: an admin key's call (one confined to an entity resets
        its entities only: else Forbidden, field "entity")."""
        body = _reset_body(entity, resource, limits, reason)
        self._call("POST", V1 + "/reset", body=body, principal=principal)

    # ------------------------------------------------------------------
    # Entities

    def create_entity(
        self,
        id: str,
        *,
        name: str = "",
        parent_id: str = "",
        cascade: bool = False,
        metadata: Optional[Mapping[str, str]] = None,
        principal: Optional[str] = None,
    ) -> Entity:
        """Create an entity; returns it as stored. Raises EntityExists if
        the id is taken, EntityNotFound if the parent does not exist.
        principal, if given, is recorded in the audit event instead of the
        client's (as on every call that writes)."""
        e = Entity(id=id, name=name, parent_id=parent_id, cascade=cascade, metadata=dict(metadata or {}))
        _, answer = self._call("POST", V1 + "/entities", body=e.to_json(), principal=principal)
        return Entity.from_json(answer)

    def get_entity(self, id: str) -> Entity:
        """The entity, or EntityNotFound."""
        _, answer = self._call("GET", V1 + "/entities/" + seg(id))
        return Entity.from_json(answer)

    def delete_entity(self, id: str, *, principal: Optional[str] = None, if_match: Optional[int] = None) -> None:
        """Remove the entity, its stored limits and its buckets; EntityNotFound
        if there is none. if_match (the entity's ``version``, as read)
        deletes it only if it is still at that version, else raises
        PreconditionFailed."""
        self._call("DELETE", V1 + "/entities/" + seg(id), principal=principal, if_match=if_match)

    def list_entities(self, after: str = "", limit: int = 100) -> Tuple[List[Entity], Optional[str]]:
        """One page of the namespace's entities, sorted by id: (entities,
        next), where next is the ``after`` of the following page, or None
        when this page is not full (the page after a full one may be
        empty). limit: 1 to 1000 (0: the server's default, 100). On
        DynamoDB an entity created a moment ago may be missing."""
        q: Dict[str, Any] = {}
        if after:
            q["after"] = after
        if limit:
            q["limit"] = limit
        _, answer = self._call("GET", V1 + "/entities", query=q)
        d = _obj(answer, "entities answer")
        return [Entity.from_json(e) for e in _list(d, "entities")], (_str(d, "next") or None)

    def iter_entities(self, *, page_size: int = 100) -> Iterator[Entity]:
        """Every entity of the namespace, sorted by id, a page at a time."""
        after = ""
        while True:
            page, nxt = self.list_entities(after, page_size)
            yield from page
            if not nxt:
                return
            after = nxt

    def update_entity(
        self,
        id: str,
        *,
        name: Optional[str] = None,
        parent_id: Optional[str] = None,
        cascade: Optional[bool] = None,
        metadata: Optional[Mapping[str, str]] = None,
        principal: Optional[str] = None,
        if_match: Optional[int] = None,
    ) -> Entity:
        """Change an entity (PATCH /v1/entities/{id}); returns it as stored.
        Only the arguments given are sent; None keeps the stored value.
        ``name=""`` removes the name; ``parent_id=""`` makes the entity a
        root and, unless cascade is given, stops its cascade;
        ``metadata={}`` removes the metadata.

        Raises EntityNotFound if the entity or the new parent does not
        exist, and ValidationError (field "parent_id") if the new parent is
        the entity or one of its descendants. The server applies the change
        to the entity as stored, so two updates at once each keep the field
        the other changed; with if_match (the ``version`` read) the entity
        must still be at that version, else PreconditionFailed and nothing
        changes."""
        if not isinstance(id, str) or not id:
            raise E.ValidationError("invalid id: the entity id must be a non-empty string", field="id", value=repr(id)[:80])
        body: Dict[str, Any] = {}
        for key, v in (("name", name), ("parent_id", parent_id)):
            if v is None:
                continue
            if not isinstance(v, str):
                raise E.ValidationError(f"invalid {key}: want a string, or None to keep it", field=key, value=repr(v)[:80])
            body[key] = v
        if cascade is not None:
            if not isinstance(cascade, bool):
                raise E.ValidationError("invalid cascade: want a bool, or None to keep it", field="cascade",
                                        value=repr(cascade)[:80])
            body["cascade"] = cascade
        if metadata is not None:
            if not isinstance(metadata, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                            for k, v in metadata.items()):
                raise E.ValidationError("invalid metadata: want a mapping of strings to strings, or None to keep it",
                                        field="metadata", value=repr(metadata)[:80])
            body["metadata"] = dict(metadata)
        _, answer = self._call("PATCH", V1 + "/entities/" + seg(id), body=body, principal=principal, if_match=if_match)
        return Entity.from_json(answer)

    def children(self, id: str) -> List[Entity]:
        """The entities whose parent is id, sorted by id."""
        _, answer = self._call("GET", V1 + "/entities/" + seg(id) + "/children")
        return [Entity.from_json(e) for e in _list(_obj(answer, "children answer"), "entities")]

    # ------------------------------------------------------------------
    # Limits

    @staticmethod
    def _scope(entity: Optional[str], resource: Optional[str]) -> Tuple[str, Optional[Dict[str, str]]]:
        """The path of a level: system (neither), resource, entity default
        (entity alone), entity + resource (both)."""
        if entity:
            path = V1 + "/limits/entities/" + seg(entity)
            return path, ({"resource": resource} if resource else None)
        if resource:
            return V1 + "/limits/resources/" + seg(resource), None
        return V1 + "/limits/system", None

    def get_limits(self, *, entity: Optional[str] = None, resource: Optional[str] = None) -> LimitsConfig:
        """The limits stored at one level (nothing is inherited): the system
        (no arguments), a resource, an entity's default (entity only) or an
        entity on a resource (both). Raises NotFound if none are stored."""
        path, q = self._scope(entity, resource)
        _, answer = self._call("GET", path, query=q)
        return LimitsConfig.from_json(answer)

    def set_limits(
        self,
        limits: Sequence[str],
        *,
        entity: Optional[str] = None,
        resource: Optional[str] = None,
        on_unavailable: Optional[str] = None,
        principal: Optional[str] = None,
        shadow: Sequence[str] = (),
        alert_at: Sequence[float] = (),
        if_match: Optional[int] = None,
        if_absent: bool = False,
    ) -> LimitsConfig:
        """Replace the limits at one level (see get_limits), e.g.
        ``set_limits(["rpm:3", "tpm:10000/min:15000"], resource="openai/gpt-4o")``.
        on_unavailable ("block" or "allow") is for the system level only.
        shadow names limits enforced in shadow: debited, never denying, their
        statuses ``shadow`` (and ``exceeded`` when they would have denied).
        alert_at are fractions of capacity (ascending, each in (0, 1], at
        most 4): a server with --alert-webhook alerts when an entity's use of
        a limit crosses one upward.
        Returns the stored configuration in canonical form, with its
        ``version``. if_match (the ``version`` read) stores it only if the
        stored one is still at that version, if_absent only if none is
        stored; else PreconditionFailed and nothing changes."""
        body: Dict[str, Any] = {"limits": limits_list(limits) or []}
        if isinstance(shadow, str):
            raise E.ValidationError("shadow: want a list of limit names, not a string", field="shadow", value=shadow[:80])
        if shadow:
            body["shadow"] = list(shadow)
        if isinstance(alert_at, (int, float, str)):
            raise E.ValidationError("alert_at: want a list of fractions of capacity", field="alert_at", value=str(alert_at)[:80])
        if alert_at:
            body["alert_at"] = [float(x) for x in alert_at]
        m = _mode(on_unavailable)
        if m:
            body["on_unavailable"] = m
        path, q = self._scope(entity, resource)
        _, answer = self._call("PUT", path, query=q, body=body, principal=principal, if_match=if_match,
                               if_absent=if_absent)
        return LimitsConfig.from_json(answer)

    def delete_limits(self, *, entity: Optional[str] = None, resource: Optional[str] = None,
                      principal: Optional[str] = None, if_match: Optional[int] = None) -> None:
        """Remove the limits at one level; NotFound if none were stored;
        with if_match (the ``version`` read), PreconditionFailed if they
        are no longer at that version."""
        path, q = self._scope(entity, resource)
        self._call("DELETE", path, query=q, principal=principal, if_match=if_match)

    def list_limits(self, after: str = "", limit: int = 100) -> Tuple[List[ScopedLimits], Optional[str]]:
        """One page of every configuration stored in the namespace, in order:
        the system's, the resources' by resource, the entities' by entity and
        resource ("_default_" for an entity default): (configs, next), where
        next (an opaque cursor) is the ``after`` of the following page, or
        None when this page is not full. limit: 1 to 1000 (0: the server's
        default, 100). On DynamoDB a configuration written a moment ago may
        be missing."""
        q: Dict[str, Any] = {}
        if after:
            q["after"] = after
        if limit:
            q["limit"] = limit
        _, answer = self._call("GET", V1 + "/limits", query=q)
        d = _obj(answer, "limits answer")
        return [ScopedLimits.from_json(c) for c in _list(d, "configs")], (_str(d, "next") or None)

    def iter_limits(self, *, page_size: int = 100) -> Iterator[ScopedLimits]:
        """Every stored configuration of the namespace, a page at a time."""
        after = ""
        while True:
            page, nxt = self.list_limits(after, page_size)
            yield from page
            if not nxt:
                return
            after = nxt

    def audit_events(self, entity: str = "", *, after: str = "", limit: int = 0) -> Tuple[List[AuditEvent], Optional[str]]:
        """A page of audit events of entity (empty: system and resource
        changes), oldest first: (events, next); pass next as after for the
        following page. limit 0 is the server's default (100)."""
        q: Dict[str, Any] = {}
        if entity:
            q["entity"] = entity
        if after:
            q["after"] = after
        if limit:
            q["limit"] = limit
        _, answer = self._call("GET", V1 + "/audit", query=q)
        d = _obj(answer, "audit answer")
        return [AuditEvent.from_json(e) for e in _list(d, "events")], (_str(d, "next") or None)

    def audit_log(self, *, since: Optional[datetime] = None, until: Optional[datetime] = None,
                  after: str = "", limit: int = 0) -> Tuple[List[AuditEvent], Optional[str]]:
        """A page of the namespace's whole audit log (every entity's events
        and the system's), in time order, from since (inclusive) to until
        (exclusive): (events, next); pass next as after for the following
        page (an admin key's call: GET /v1/audit/log). A naive datetime is
        taken as UTC; limit 0 is the server's default (100)."""
        q: Dict[str, Any] = {}
        # The server truncates both bounds to the millisecond: so does this.
        if since is not None:
            q["since"] = unix_ms_floor(since)
        if until is not None:
            q["until"] = unix_ms_floor(until)
        if after:
            q["after"] = after
        if limit:
            q["limit"] = limit
        _, answer = self._call("GET", V1 + "/audit/log", query=q)
        d = _obj(answer, "audit answer")
        return [AuditEvent.from_json(e) for e in _list(d, "events")], (_str(d, "next") or None)

    # ------------------------------------------------------------------
    # Usage and capacity

    @staticmethod
    def _usage_query(entity: Optional[str], resource: Optional[str], window: Optional[str],
                     start: Optional[datetime], end: Optional[datetime], after: Optional[str],
                     limit: Optional[int]) -> Dict[str, Any]:
        q: Dict[str, Any] = {}
        for k, v in (("entity", entity), ("resource", resource), ("window", window), ("after", after)):
            if v:
                q[k] = v
        if start is not None:
            q["from"] = unix_ms_ceil(start)
        if end is not None:
            q["to"] = unix_ms_ceil(end)
        if limit:
            q["limit"] = limit
        return q

    def usage(self, entity: Optional[str] = None, resource: Optional[str] = None, *, window: Optional[str] = None,
              start: Optional[datetime] = None, end: Optional[datetime] = None, after: Optional[str] = None,
              limit: Optional[int] = None) -> Tuple[List[Usage], Optional[str]]:
        """Usage snapshots (hour or day windows starting in [start, end)):
        (snapshots, next). One of entity and resource is required."""
        q = self._usage_query(entity, resource, window, start, end, after, limit)
        _, answer = self._call("GET", V1 + "/usage", query=q)
        d = _obj(answer, "usage answer")
        return [Usage.from_json(u) for u in _list(d, "usage")], (_str(d, "next") or None)

    def usage_summary(self, entity: Optional[str] = None, resource: Optional[str] = None, *, window: Optional[str] = None,
                      start: Optional[datetime] = None, end: Optional[datetime] = None) -> UsageSummary:
        """Totals, averages and peaks of the usage a query covers."""
        q = self._usage_query(entity, resource, window, start, end, None, None)
        _, answer = self._call("GET", V1 + "/usage/summary", query=q)
        return UsageSummary.from_json(answer)

    def capacity(self, resource: str) -> Capacity:
        """A resource's capacity and use summed over its buckets (reads every
        bucket: for dashboards, not hot paths)."""
        _, answer = self._call("GET", V1 + "/capacity", query={"resource": resource})
        return Capacity.from_json(answer)

    def top_denied(self, resource: Optional[str] = None, limit: Optional[str] = None, n: int = 128) -> List[DeniedEntity]:
        """The entities the server refused most in the client's namespace, most
        refused first, of resource and limit when given; n (1 to 128) bounds
        the list. Each server answers for the decisions it took."""
        query: Dict[str, Any] = {"n": str(n)}
        if resource:
            query["resource"] = resource
        if limit:
            query["limit"] = limit
        _, answer = self._call("GET", V1 + "/metrics/top-denied", query=query)
        return [DeniedEntity.from_json(e) for e in _list(_obj(answer, "top denied"), "entities")]

    # ------------------------------------------------------------------
    # API keys kept in the store (an admin key of the namespace)

    def create_key(
        self,
        name: str,
        role: str,
        *,
        entity: Optional[str] = None,
        allow_limits: bool = False,
        expires_in: Optional[Duration] = None,
        principal: Optional[str] = None,
    ) -> CreatedKey:
        """Create an API key of the client's namespace, kept in the store (its
        hash only) and honoured by every server over it; returns it with its
        secret in ``key``, which is shown this once: hand it over, do not
        lose it. role is "acquire", "read" or "admin". entity confines the
        key to that entity and its descendants; allow_limits lets it send
        its own limits (and on_unavailable "allow" where the stored mode is
        block), which admin keys may anyway; expires_in (seconds or
        timedelta, rounded up to whole seconds; None: until revoked) makes
        it stop working after that long. Raises KeyExists if the namespace
        has a key of that name."""
        if not isinstance(name, str) or not name:
            raise E.ValidationError("invalid name: the key's name must be a non-empty string", field="name",
                                    value=repr(name)[:80])
        if role not in _ROLES:
            raise E.ValidationError('invalid role: want "acquire", "read" or "admin"', field="role", value=str(role)[:80])
        if not isinstance(allow_limits, bool):
            raise E.ValidationError("invalid allow_limits: want a bool", field="allow_limits", value=repr(allow_limits)[:80])
        body: Dict[str, Any] = {"name": name, "role": role}
        if entity is not None:
            if not isinstance(entity, str) or not entity:
                raise E.ValidationError("invalid entity: want a non-empty entity id, or None for every entity",
                                        field="entity", value=repr(entity)[:80])
            body["entity"] = entity
        if allow_limits:
            body["allow_limits"] = True
        if expires_in is not None:
            s = seconds(expires_in, "expires_in_s")
            if s <= 0:
                raise E.ValidationError("invalid expires_in_s: must be positive, or None for a key that works until revoked",
                                        field="expires_in_s", value=str(expires_in)[:80])
            body["expires_in_s"] = int(math.ceil(s))
        _, answer = self._call("POST", V1 + "/keys", body=body, principal=principal)
        return CreatedKey.from_json(answer)

    def list_keys(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> Tuple[List[KeyInfo], Optional[str]]:
        """One page of the stored API keys of the namespace, sorted by name,
        without secrets or hashes: (keys, next), where next is the ``after``
        of the following page, or None when this page is not full (the page
        after a full one may be empty). limit: 1 to 1000 (None or 0: the
        server's default, 100). Keys of the server's keys file are not
        listed."""
        q: Dict[str, Any] = {}
        if after:
            q["after"] = after
        if limit:
            q["limit"] = limit
        _, answer = self._call("GET", V1 + "/keys", query=q)
        d = _obj(answer, "keys answer")
        return [KeyInfo.from_json(k) for k in _list(d, "keys")], (_str(d, "next") or None)

    def iter_keys(self, *, page_size: int = 100) -> Iterator[KeyInfo]:
        """Every stored API key of the namespace, sorted by name, a page at a time."""
        after: Optional[str] = None
        while True:
            page, after = self.list_keys(after=after, limit=page_size)
            yield from page
            if not after:
                return

    def revoke_key(self, name: str, *, principal: Optional[str] = None) -> None:
        """Delete the stored API key named name: the server refuses it at once
        (Unauthorized), every other server over the store within its refresh
        interval. Raises KeyNotFound if there is no such key."""
        if not isinstance(name, str) or not name:
            raise E.ValidationError("invalid name: the key's name must be a non-empty string", field="name",
                                    value=repr(name)[:80])
        self._call("DELETE", V1 + "/keys/" + seg(name), principal=principal)

    # ------------------------------------------------------------------
    # Namespace registry (with API keys: an admin key for namespace "*")

    def register_namespace(self, name: str) -> Namespace:
        """Register a namespace; NamespaceExists if the name is taken."""
        _, answer = self._call("POST", V1 + "/namespaces", body={"name": name})
        return Namespace.from_json(answer)

    def list_namespaces(self) -> List[Namespace]:
        """Every namespace, deleted ones included, sorted by name."""
        _, answer = self._call("GET", V1 + "/namespaces")
        return [Namespace.from_json(n) for n in _list(_obj(answer, "namespaces answer"), "namespaces")]

    def get_namespace(self, name: str) -> Namespace:
        """The namespace, or NamespaceNotFound."""
        _, answer = self._call("GET", V1 + "/namespaces/" + seg(name))
        return Namespace.from_json(answer)

    def delete_namespace(self, name: str) -> None:
        """Soft-delete a namespace: calls in it raise NamespaceDeleted until
        recover_namespace; its data stays until purge_namespace."""
        self._call("DELETE", V1 + "/namespaces/" + seg(name))

    def recover_namespace(self, name: str) -> None:
        """Undo delete_namespace."""
        self._call("POST", V1 + "/namespaces/" + seg(name) + "/recover")

    def purge_namespace(self, name: str, *, timeout: Optional[float] = PURGE_TIMEOUT) -> int:
        """Delete every item of a soft-deleted namespace, then the namespace;
        returns how many items went. It may take minutes: timeout defaults
        to PURGE_TIMEOUT rather than the client's."""
        _, answer = self._call("POST", V1 + "/namespaces/" + seg(name) + "/purge", timeout=timeout)
        d = _obj(answer, "purge answer")
        n = d.get("deleted", 0)
        return n if isinstance(n, int) else 0

    # ------------------------------------------------------------------
    # Health

    def health(self) -> str:
        """GET /healthz: "ok" while the server answers; raises
        ServerUnreachable (or another TollgateError) otherwise."""
        _, answer = self._call("GET", "/healthz")
        return _str(_obj(answer, "health answer"), "status")

    def ready(self) -> str:
        """GET /readyz: "ready" when the server and its store answer; raises
        Unavailable when the store does not, ServerUnreachable when the
        server does not."""
        _, answer = self._call("GET", "/readyz")
        return _str(_obj(answer, "readiness answer"), "status")

    # ------------------------------------------------------------------
    # Decorator

    def rate_limit(
        self,
        *,
        entity: Union[str, "arg", Callable[..., str]],
        resource: Union[str, "arg", Callable[..., str]],
        consume: Union[Mapping[str, int], "arg", Callable[..., Mapping[str, int]]],
        wait: Optional[Duration] = None,
        limits: Optional[Sequence[str]] = None,
        on_unavailable: Optional[str] = None,
        lease_ttl: Optional[Duration] = None,
    ) -> Callable[[F], F]:
        """Decorate a function so that each call runs holding a lease:
        acquire (or, with wait, wait up to that long), run, commit; roll back
        if the function raises. entity, resource and consume may each be a
        value, a callable of the function's arguments, or tollgate.arg(NAME)
        naming one of them. See :func:`tollgate.rate_limit`."""
        return rate_limit(self, entity=entity, resource=resource, consume=consume, wait=wait,
                          limits=limits, on_unavailable=on_unavailable, lease_ttl=lease_ttl)


def _own_key(call: Mapping[str, Any], given: Optional[str]) -> Optional[str]:
    """The idempotency key of an acquire call (_acquire_call) when the
    client made it up (the caller gave none), else None: only those are
    abandoned."""
    if given is not None:
        return None
    return (call.get("headers") or {}).get("Idempotency-Key")


def _precondition_headers(if_match: Optional[int], if_absent: bool) -> Optional[Dict[str, str]]:
    """If-Match of a version (its ETag, the version in double quotes) or
    If-None-Match: * (if_absent); None for neither."""
    if if_match is not None and if_absent:
        raise E.ValidationError("give if_match or if_absent, not both", field="if_match", value=repr(if_match)[:80])
    if if_absent:
        return {"If-None-Match": "*"}
    if if_match is None:
        return None
    if isinstance(if_match, bool) or not isinstance(if_match, int) or if_match < 1:
        raise E.ValidationError("invalid if_match: want a version (an int, 1 or more)", field="if_match",
                                value=repr(if_match)[:80])
    return {"If-Match": f'"{if_match}"'}


def _principal_header(principal: Optional[str]) -> Optional[Dict[str, str]]:
    """The header of a call's own principal: None (or "") keeps the
    client's. At most MAX_PRINCIPAL_LEN bytes, no control characters."""
    if principal is None or principal == "":
        return None
    if not isinstance(principal, str):
        raise E.ValidationError("invalid principal: want a string, or None for the client's", field="principal",
                                value=repr(principal)[:80])
    if len(principal.encode("utf-8")) > MAX_PRINCIPAL_LEN:
        raise E.ValidationError(f"invalid principal: longer than {MAX_PRINCIPAL_LEN} bytes", field="principal",
                                value=principal[:80])
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in principal):
        raise E.ValidationError("invalid principal: no control characters", field="principal", value=repr(principal)[:80])
    return {PRINCIPAL_HEADER: _header_value(principal)}


def _header_value(v: str) -> str:
    """v as http.client sends its UTF-8 bytes (it encodes header values as
    Latin-1), as the Go client does."""
    return v.encode("utf-8").decode("latin-1")


def _namespace_opt(ns: Optional[str]) -> Optional[str]:
    if ns is None or ns == "":
        return None
    return namespace(ns)
