"""Lease: a granted acquire, recorded in the server's store."""

from __future__ import annotations

import threading
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Type

from . import errors as E
from ._util import Duration, consume_body, penalty_body, ttl_ms
from .types import LimitStatus, _counts, _int, _obj, _str, from_ms, statuses

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Lease"]

OPEN = "open"
COMMITTED = "committed"
ROLLED_BACK = "rolled_back"
CLOSED = "closed"


class _LeaseState:
    """What Lease and AsyncLease share: the server's last word on the lease,
    and how a call's failure changes it (no I/O here)."""

    def __init__(self, client: Any, entity: str, resource: str, answer: Mapping[str, Any]) -> None:
        d = _obj(answer, "lease")
        lease_id = _str(d, "lease_id")
        if not lease_id:
            raise E.BadResponse("malformed answer from the server: granted acquire without a lease_id")
        self._client = client
        self.id: str = lease_id
        self.entity: str = entity
        self.resource: str = resource
        self.degraded: bool = bool(d.get("degraded", False))
        self.replayed: bool = False
        self._lock = threading.Lock()
        self._consumed: Dict[str, int] = _counts(d, "consumed")
        self._statuses: List[LimitStatus] = statuses(d)
        self._expires_at: Optional[datetime] = from_ms(_int(d, "expires_at_ms"))
        self._state = OPEN

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, entity={self.entity!r}, resource={self.resource!r}, state={self.state!r})"

    # --- what the server last reported

    @property
    def state(self) -> str:
        """"open", "committed" or "rolled_back" when this handle ended it (or
        found it committed or rolled back, as it asked), or "closed" when the
        server reported it gone (ended otherwise elsewhere, expired)."""
        with self._lock:
            return self._state

    @property
    def closed(self) -> bool:
        """True once the lease has ended for this handle."""
        with self._lock:
            return self._state != OPEN

    @property
    def consumed(self) -> Dict[str, int]:
        """What the lease has consumed so far per limit: what was asked, once
        however many cascade levels it debited (each level's debit is in
        ``statuses``), as the server last reported it; {} once it has
        ended."""
        with self._lock:
            return {} if self._state != OPEN else dict(self._consumed)

    @property
    def statuses(self) -> List[LimitStatus]:
        """Every limit the acquire debited, just after the grant; [] for a
        degraded or ended lease."""
        with self._lock:
            return [] if self._state != OPEN else list(self._statuses)

    @property
    def expires_at(self) -> Optional[datetime]:
        """When the lease expires unless extended (server clock, UTC); None
        for a degraded lease, which never expires."""
        with self._lock:
            return self._expires_at

    def _check_open(self) -> None:
        if self.closed:
            raise E.LeaseClosed(f"lease {self.id}: lease closed", code="lease_closed")

    def _failed(self, action: Optional[str], err: E.TollgateError) -> Dict[str, Any]:
        """What a lease call's error means for the handle: raises the error
        to give the caller (the handle closed if the lease is over), or
        returns the answer to use (a rollback that found the lease rolled
        back already is done)."""
        if isinstance(err, E.LeaseNotFound):
            # The lease is over for this handle, whoever ended it.
            self._end(None)
            raise E._LeaseGone(f"lease {self.id}: lease closed ({err.message})", status=err.status,
                               code=err.code, reason=err.reason, body=err.body) from None
        if isinstance(err, E.LeaseEnded) and action == "rollback" and err.ended == ROLLED_BACK:
            return {}
        if isinstance(err, E.LeaseClosed):
            self._end(None)
        raise err

    def _update(self, answer: Mapping[str, Any]) -> None:
        d = _obj(answer, "lease")
        consumed = _counts(d, "consumed")
        expires = from_ms(_int(d, "expires_at_ms"))
        with self._lock:
            if self._state != OPEN:
                return
            self._consumed = consumed
            if expires is not None:
                self._expires_at = expires

    def _holds_slots(self) -> bool:
        """Whether the lease took concurrency or reserved tokens, which its
        ending gives back: a waiter of its client for them is woken."""
        with self._lock:
            return self._state == OPEN and any(
                s.kind in ("concurrency", "reserved") and s.requested > 0 for s in self._statuses)

    def _end(self, state: Optional[str]) -> None:
        with self._lock:
            if self._state == OPEN:
                self._state = state or CLOSED
            self._consumed, self._statuses = {}, []


class Lease(_LeaseState):
    """A granted acquire. Any server over the same store serves it by its id.

    Adjust it when the real cost is known, extend it if the work outlasts
    its TTL, then end it with commit() or rollback(); if neither is called,
    the server's reconciler commits it as it stands when its TTL ends.

    As a context manager it commits on normal exit and rolls back when the
    block raises (the exception propagates)::

        with client.acquire("key-1", "openai/gpt-4o", {"rpm": 1, "tpm": 500}) as lease:
            used = call_the_model()
            lease.adjust({"tpm": used - 500})

    Once the lease has ended (here or, as the server reports, anywhere
    else), adjust/extend/commit/rollback/penalize raise
    :class:`~tollgate.LeaseClosed` without a call; the server's answer that
    it has ended is a :class:`~tollgate.LeaseEnded` saying how. Safe for
    use from several threads.

    ``replayed`` is True when the acquire's answer was the grant of an
    earlier call with the same idempotency key (a retry after a lost
    answer), handed out again: that call debited nothing, and ``statuses``
    is empty.
    """

    # --- calls

    def adjust(self, delta: Mapping[str, int]) -> None:
        """Record a change to the lease's consumption, e.g. the difference
        between an estimate and the real cost; negative amounts give back
        (never below what the lease took: that is a ValidationError on
        consume.NAME, and nothing is recorded). Applied at commit."""
        answer = self._call("adjust", {"consume": consume_body(delta, allow_negative=True)})
        self._update(answer)

    def extend(self, ttl: Duration) -> None:
        """Move the lease's expiry to ttl from now (seconds or timedelta; the
        server accepts 1 s to 24 h). Call it well before expires_at."""
        ms = ttl_ms(ttl, "ttl_ms")
        if ms is None:
            raise E.ValidationError("invalid ttl_ms: must be positive", field="ttl_ms", value=str(ttl))
        answer = self._call("extend", {"ttl_ms": ms})
        self._update(answer)

    def commit(self) -> None:
        """Write pending adjustments and return the lease's concurrency
        tokens. The client sends the commit again when its answer is lost;
        a commit of a lease that was committed (by a send whose answer was
        lost, or through another handle) succeeds, answered as the first.
        If the store fails (Unavailable) or the server cannot be reached,
        the lease stays open and commit (or rollback) can be called again.
        A lease that ended otherwise raises LeaseEnded."""
        slots = self._holds_slots()
        self._call("commit", None)
        self._end(COMMITTED)
        if slots:
            self._client._released(self.entity, self.resource)

    def rollback(self) -> None:
        """Give back everything the lease consumed and discard its
        adjustments. Sent again when its answer is lost; a lease found
        rolled back already (by a send whose answer was lost, or through
        another handle) is done. Failures as for commit."""
        slots = self._holds_slots()
        self._call("rollback", None)
        self._end(ROLLED_BACK)
        if slots:
            self._client._released(self.entity, self.resource)

    def penalize(
        self,
        limits: Sequence[str],
        *,
        retry_after: Optional[Duration] = None,
        until: Optional[datetime] = None,
        reason: str = "",
        principal: Optional[str] = None,
    ) -> None:
        """Empty the named rate limits of the lease's entity and resource for
        retry_after (seconds or timedelta, from the server's now) or until a
        time, as Client.penalize does, looking the limits up among those the
        lease was acquired with; principal, if given, is recorded in the
        audit event instead of the client's. The lease stays open. A
        degraded lease penalizes through Client.penalize."""
        body = penalty_body(limits, retry_after, until, reason)
        if self.degraded:
            self._check_open()
            self._client._penalize_body(self.entity, self.resource, body, principal)
            return
        self._call("penalize", body, principal=principal)

    def refresh(self) -> None:
        """Read the lease as the server has it now (consumed, expiry). A
        lease that has ended raises LeaseEnded, and the handle is closed."""
        answer = self._call(None, None, method="GET")
        self._update(answer)

    # --- context manager

    def __enter__(self) -> "Lease":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self.closed:
            return  # ended inside the block
        if exc_type is not None:
            try:
                self.rollback()
            except E.TollgateError as rb:
                # Keep the block's exception; the lease expires and is
                # committed by the reconciler if the rollback did not arrive.
                if hasattr(exc, "add_note"):
                    exc.add_note(f"tollgate: rolling back lease {self.id} failed: {rb}")  # type: ignore[union-attr]
            return
        try:
            self.commit()
        except (E.Unavailable, E.ServerUnreachable):
            # As the Go client's WithSlot: roll back rather than hold
            # concurrency tokens until the lease expires.
            try:
                self.rollback()
            except E.TollgateError:
                pass
            raise

    # --- internals

    def _call(self, action: Optional[str], body: Any, method: str = "POST",
              principal: Optional[str] = None) -> Dict[str, Any]:
        self._check_open()
        try:
            answer = self._client._lease_call(method, self.id, action, body, principal)
        except E.TollgateError as err:
            return self._failed(action, err)
        return answer if isinstance(answer, dict) else {}
