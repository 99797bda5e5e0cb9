"""Acquires of unknown outcome (docs/semantics.md 8), as the Go client
abandons them (client/abandon.go).

An acquire the server may have granted without its caller learning it
(the server answered 5xx: its store did not answer; a 2xx answer the
client could not read; no whole answer came back after the client's
retries; the call's timeout or the task's cancellation ended it with the
request in flight; a grant answered degraded, whose store call failed)
may hold a concurrency slot, or tokens, for a lease nobody holds, until a
reconciler ends it at its expiry. When the client made its idempotency key
up itself, nobody will send it again: the client knows the lease's id (the
key's lease id, :func:`idempotent_lease_id`), and rolls the lease back in
the background, at once and again after each of ABANDON_DELAYS while the
server answers that there is no such lease (the write may land late) or
does not answer. A key the caller gave is left alone: the caller may send
it again, and must find the first grant."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Sequence, Set, Tuple

from . import errors as E

#: The waits before each rollback after the first (sent at once), in
#: seconds: 1, 5 and 30 s after the acquire failed.
ABANDON_DELAYS: Tuple[float, ...] = (1.0, 4.0, 25.0)
#: Bounds each rollback when the client has no timeout (seconds).
ABANDON_TIMEOUT = 10.0
#: How many acquires a client abandons at once; those beyond are reported
#: dropped, and left to the reconciler.
MAX_ABANDONING = 64

#: The outcomes of an abandonment (:attr:`Abandoned.outcome`): the server
#: rolled the lease back, or said it had ended already;
ABANDON_ENDED = "ended"
#: every rollback found no such lease: the acquire was not granted (or
#: landed after the last: a reconciler ends it);
ABANDON_NOT_FOUND = "not_found"
#: the last rollback got no answer, or an error (``error``);
ABANDON_FAILED = "failed"
#: not rolled back, as MAX_ABANDONING were under way.
ABANDON_DROPPED = "dropped"

_LEASE_ID_PREFIX = b"tollgate idempotency key\x00"


@dataclass(frozen=True)
class Abandoned:
    """An acquire of unknown outcome the client abandoned, as the client's
    ``on_abandon`` callback receives it when its rollbacks end."""

    lease_id: str
    entity: str
    resource: str
    #: "ended", "not_found", "failed" or "dropped" (the ABANDON_* constants).
    outcome: str
    #: The last rollback's error, with "failed".
    error: Optional[BaseException] = None


def idempotent_lease_id(key: str) -> str:
    """The lease id of an acquire sent with idempotency key key, as the
    server derives it (Go: model.IdempotentLeaseID): the first 128 bits of
    the SHA-256 of a fixed prefix and the key, in lowercase hex."""
    return hashlib.sha256(_LEASE_ID_PREFIX + key.encode("utf-8")).hexdigest()[:32]


def unknown_outcome(err: BaseException) -> bool:
    """Whether an acquire that raised err may have been granted unseen: no
    whole answer (ServerUnreachable: also the call's timeout), the task
    cancelled in flight, a 5xx, or an answer the client could not read.
    Not a refusal (4xx), nor an error raised before anything was sent."""
    if isinstance(err, (E.ServerUnreachable, E.BadResponse, asyncio.CancelledError)):
        return True
    if isinstance(err, E.TollgateError):
        return err.status is not None and err.status >= 500
    return False


def _outcome(err: Optional[BaseException]) -> Tuple[str, Optional[BaseException]]:
    """The outcome of one rollback that raised err (None: it succeeded)."""
    if err is None:
        return ABANDON_ENDED, None
    if isinstance(err, E.LeaseNotFound):
        return ABANDON_NOT_FOUND, None
    if isinstance(err, E.LeaseClosed):  # 409 lease_closed: ended already
        return ABANDON_ENDED, None
    return ABANDON_FAILED, err


OnAbandon = Optional[Callable[[Abandoned], Any]]


class Abandoner:
    """The sync client's abandonments: each on a daemon thread of its own
    (it never keeps the process from exiting), at most MAX_ABANDONING at
    once. rollback(lease_id) sends one rollback, raising its error."""

    def __init__(self, rollback: Callable[[str], Any], on_abandon: OnAbandon) -> None:
        self._rollback = rollback
        self.on_abandon = on_abandon
        #: The waits between rollbacks; tests make them short.
        self.delays: Sequence[float] = ABANDON_DELAYS
        self._slots = threading.BoundedSemaphore(MAX_ABANDONING)

    def abandon(self, key: str, entity: str, resource: str) -> None:
        """Roll back, in the background, the lease of an acquire of entity
        and resource sent with key, whose outcome is unknown."""
        lease_id = idempotent_lease_id(key)
        if self._slots.acquire(blocking=False):
            try:
                threading.Thread(target=self._run, args=(lease_id, entity, resource, tuple(self.delays)),
                                 name="tollgate-abandon", daemon=True).start()
                return
            except RuntimeError:  # no thread to be had: as if too many were under way
                self._slots.release()
        if self.on_abandon is not None:
            # On a thread of its own, as the caller's call must not wait for it.
            threading.Thread(target=self.on_abandon, args=(Abandoned(lease_id, entity, resource, ABANDON_DROPPED),),
                             name="tollgate-abandon", daemon=True).start()

    def _run(self, lease_id: str, entity: str, resource: str, delays: Tuple[float, ...]) -> None:
        try:
            outcome, err = self._try(lease_id)
            for d in delays:
                if outcome == ABANDON_ENDED:
                    break
                time.sleep(d)
                outcome, err = self._try(lease_id)
        finally:
            self._slots.release()
        if self.on_abandon is not None:
            self.on_abandon(Abandoned(lease_id, entity, resource, outcome, err))

    def _try(self, lease_id: str) -> Tuple[str, Optional[BaseException]]:
        try:
            self._rollback(lease_id)
        except Exception as err:  # any failure is the outcome's, never the caller's
            return _outcome(err)
        return _outcome(None)


class AsyncAbandoner:
    """The asyncio client's abandonments: each a task of the running event
    loop (the loop keeps no reference to it: this does, until it ends), at
    most MAX_ABANDONING at once. rollback(lease_id) sends one rollback."""

    def __init__(self, rollback: Callable[[str], Awaitable[Any]], on_abandon: OnAbandon) -> None:
        self._rollback = rollback
        self.on_abandon = on_abandon
        self.delays: Sequence[float] = ABANDON_DELAYS
        self._tasks: Set["asyncio.Task[None]"] = set()

    def abandon(self, key: str, entity: str, resource: str) -> None:
        """As Abandoner.abandon, from a coroutine (the running loop's)."""
        loop = asyncio.get_running_loop()
        ab = Abandoned(idempotent_lease_id(key), entity, resource, ABANDON_DROPPED)
        if len(self._tasks) >= MAX_ABANDONING:
            loop.call_soon(self._report, ab)
            return
        task = loop.create_task(self._run(ab, tuple(self.delays)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, ab: Abandoned, delays: Tuple[float, ...]) -> None:
        outcome: str = ABANDON_FAILED
        err: Optional[BaseException] = None
        try:
            outcome, err = await self._try(ab.lease_id)
            for d in delays:
                if outcome == ABANDON_ENDED:
                    break
                await asyncio.sleep(d)
                outcome, err = await self._try(ab.lease_id)
        except asyncio.CancelledError as cancelled:  # the loop is closing
            self._report(Abandoned(ab.lease_id, ab.entity, ab.resource, ABANDON_FAILED, cancelled))
            raise
        self._report(Abandoned(ab.lease_id, ab.entity, ab.resource, outcome, err))

    async def _try(self, lease_id: str) -> Tuple[str, Optional[BaseException]]:
        try:
            await self._rollback(lease_id)
        except Exception as err:
            return _outcome(err)
        return _outcome(None)

    def _report(self, ab: Abandoned) -> None:
        if self.on_abandon is None:
            return
        try:
            self.on_abandon(ab)
        except Exception as err:  # the loop's handler logs it, as it would a task's
            asyncio.get_running_loop().call_exception_handler(
                {"message": "tollgate: on_abandon raised", "exception": err})
