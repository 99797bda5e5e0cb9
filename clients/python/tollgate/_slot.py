"""Client.slot: run work holding a lease that is kept alive while it runs,
as Go's WithSlot (a background thread extends it every half its expiry)."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Type

from . import errors as E
from ._util import Duration, seconds
from .lease import COMMITTED, ROLLED_BACK, Lease, _LeaseState

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Slot", "MIN_SLOT_TTL"]

#: The shortest expiry a slot extends by, in seconds (the server's least
#: lease TTL), as the Go client's.
MIN_SLOT_TTL = 1.0


def slot_ttl(lease: _LeaseState, lease_ttl: Optional[Duration]) -> float:
    """How long each extension lasts, in seconds (0: never extend): the
    lease_ttl asked for or, without one, the expiry the server granted as
    measured on this machine's clock at the grant; never below
    MIN_SLOT_TTL. A degraded lease never expires."""
    if lease.degraded or lease.expires_at is None:
        return 0.0
    if lease_ttl is not None:
        ttl = seconds(lease_ttl, "lease_ttl")
    else:
        ttl = (lease.expires_at - datetime.now(timezone.utc)).total_seconds()
    return max(ttl, MIN_SLOT_TTL)


def ended_here(lease: _LeaseState) -> bool:
    """The lease was ended through this handle (the work committed or
    rolled it back itself): an extension finding it closed is no loss."""
    return lease.state in (COMMITTED, ROLLED_BACK)


class Slot:
    """The context manager of Client.slot. Entering acquires (or waits, with
    wait) and returns the :class:`Lease`; while the block runs a daemon
    thread extends the lease by its expiry every half expiry, so work
    longer than the expiry keeps its slot, and a crashed process's slot
    still comes back within one expiry. An extension that fails otherwise
    (the network, the store) is tried again at the next half.

    If an extension finds the lease gone, the thread cannot stop the block:
    ``lease.closed`` turns True (long work can check it between steps) and
    leaving the block raises :class:`~tollgate.SlotLost` (unless the block
    raised, whose exception is kept). Otherwise the lease ends as the
    Lease's context manager ends it: commit on normal exit, rollback when
    the block raises.

    ``extensions`` counts the extensions the server accepted."""

    def __init__(self, acquire: Callable[[], Lease], lease_ttl: Optional[Duration]) -> None:
        self._acquire = acquire
        self._lease_ttl = lease_ttl
        self.lease: Optional[Lease] = None
        self.ttl = 0.0
        self.extensions = 0
        self.lost: Optional[E.TollgateError] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> Lease:
        lease = self._acquire()
        self.lease, self.ttl = lease, slot_ttl(lease, self._lease_ttl)
        if self.ttl > 0:
            self._thread = threading.Thread(target=self._keep_alive, name=f"tollgate-slot-{lease.id}", daemon=True)
            self._thread.start()
        return lease

    def _keep_alive(self) -> None:
        lease = self.lease
        assert lease is not None
        while not self._stop.wait(self.ttl / 2):
            try:
                lease.extend(self.ttl)
                self.extensions += 1
            except E.LeaseClosed as err:
                if not ended_here(lease):
                    self.lost = err
                return
            except E.TollgateError:
                continue  # tried again at the next half

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()  # no extension runs once the lease ends
        lease = self.lease
        assert lease is not None
        if self.lost is not None:
            lost = self.lost
            if exc is None:
                raise E.SlotLost(f"lease {lease.id}: slot lost while its work ran: {lost}", status=lost.status,
                                 code=lost.code, reason=lost.reason, body=lost.body) from lost
            if hasattr(exc, "add_note"):
                exc.add_note(f"tollgate: the slot of lease {lease.id} was lost while the work ran: {lost}")  # type: ignore[union-attr]
            return
        lease.__exit__(exc_type, exc, tb)


def sync_slot(client: "Client", entity: str, resource: str, consume: Any, *, wait: Optional[Duration],
              limits: Any, on_unavailable: Optional[str], lease_ttl: Optional[Duration]) -> Slot:
    def acquire() -> Lease:
        if wait is not None:
            return client.wait(entity, resource, consume, wait, limits=limits, on_unavailable=on_unavailable,
                               lease_ttl=lease_ttl)
        return client.acquire(entity, resource, consume, limits=limits, on_unavailable=on_unavailable,
                              lease_ttl=lease_ttl)

    return Slot(acquire, lease_ttl)
