"""AsyncClient: the Client for asyncio services (standard library only).

The calls of the request path (acquire, acquire_and_commit, wait, slot,
leases, reservations, available, penalize, reset, health) are asyncio
calls over a pool of keep-alive HTTP/1.1 connections (_aio_http): no
thread per call. The administrative calls (entities, limits, keys,
namespaces, usage, audit, capacity) run the sync Client's code in a worker
thread (asyncio.to_thread): they are rare, and one implementation of them
keeps the two clients alike. Both send the same requests, map the same
errors and repeat the same calls (the request building, answer decoding
and error mapping are shared with the sync client)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from datetime import datetime
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import errors as E
from ._abandon import ABANDON_TIMEOUT, Abandoned, AsyncAbandoner, unknown_outcome
from ._aio_http import AsyncTransport
from ._decorator import _resolver, arg
from ._http import Answer, seg
from ._slot import ended_here, slot_ttl
from ._util import Duration, consume_body, penalty_body, seconds, ttl_ms
from ._wake import AsyncReleases
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
from .client import DEFAULT_TIMEOUT, DEFAULT_USER_AGENT, Client, _own_key, _principal_header
from .lease import COMMITTED, ROLLED_BACK, _LeaseState
from .types import Grant, LeaseInfo, LimitStatus, Reservation, Reserved, _counts, _obj, _str, statuses

__all__ = ["AsyncClient", "AsyncLease", "AsyncSlot"]

F = TypeVar("F", bound=Callable[..., Any])


class AsyncLease(_LeaseState):
    """A granted acquire, as :class:`~tollgate.Lease`, with coroutine
    methods: ``await lease.adjust(...)``, ``extend``, ``commit``,
    ``rollback``, ``penalize``, ``refresh``. As an async context manager it
    commits on normal exit and rolls back when the block raises, also when
    the task is cancelled (the rollback is sent before the cancellation
    goes on)::

        async with await client.acquire("key-1", "openai/gpt-4o", {"rpm": 1, "tpm": 500}) as lease:
            used = await call_the_model()
            await lease.adjust({"tpm": used - 500})
    """

    async def adjust(self, delta: Mapping[str, int]) -> None:
        """As Lease.adjust."""
        self._update(await self._call("adjust", {"consume": consume_body(delta, allow_negative=True)}))

    async def extend(self, ttl: Duration) -> None:
        """As Lease.extend."""
        ms = ttl_ms(ttl, "ttl_ms")
        if ms is None:
            raise E.ValidationError("invalid ttl_ms: must be positive", field="ttl_ms", value=str(ttl))
        self._update(await self._call("extend", {"ttl_ms": ms}))

    async def commit(self) -> None:
        """As Lease.commit."""
        slots = self._holds_slots()
        await self._call("commit", None)
        self._end(COMMITTED)
        if slots:
            self._client._released(self.entity, self.resource)

    async def rollback(self) -> None:
        """As Lease.rollback."""
        slots = self._holds_slots()
        await self._call("rollback", None)
        self._end(ROLLED_BACK)
        if slots:
            self._client._released(self.entity, self.resource)

    async def penalize(self, limits: Sequence[str], *, retry_after: Optional[Duration] = None,
                       until: Optional[datetime] = None, reason: str = "", principal: Optional[str] = None) -> None:
        """As Lease.penalize."""
        body = penalty_body(limits, retry_after, until, reason)
        if self.degraded:
            self._check_open()
            await self._client._penalize_body(self.entity, self.resource, body, principal)
            return
        await self._call("penalize", body, principal=principal)

    async def refresh(self) -> None:
        """As Lease.refresh."""
        self._update(await self._call(None, None, method="GET"))

    async def __aenter__(self) -> "AsyncLease":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if self.closed:
            return
        if exc_type is not None:
            try:
                # Shielded: a second cancellation goes on at once, but the
                # rollback is still sent.
                await asyncio.shield(self.rollback())
            except E.TollgateError as rb:
                if hasattr(exc, "add_note"):
                    exc.add_note(f"tollgate: rolling back lease {self.id} failed: {rb!r}")  # type: ignore[union-attr]
            return
        try:
            await self.commit()
        except (E.Unavailable, E.ServerUnreachable):
            try:
                await self.rollback()  # rather than hold concurrency tokens until the expiry
            except E.TollgateError:
                pass
            raise

    async def _call(self, action: Optional[str], body: Any, method: str = "POST",
                    principal: Optional[str] = None) -> Dict[str, Any]:
        self._check_open()
        try:
            answer = await self._client._lease_call(method, self.id, action, body, principal)
        except E.TollgateError as err:
            return self._failed(action, err)
        return answer if isinstance(answer, dict) else {}


class AsyncSlot:
    """The async context manager of AsyncClient.slot: ``async with
    client.slot(...) as lease``. Entering acquires (or waits) and returns
    the :class:`AsyncLease`; while the block runs, a task extends it by its
    expiry every half expiry (an extension that fails otherwise is tried
    again at the next half).

    If an extension finds the lease gone, the block's task is cancelled (as
    Go's WithSlot cancels the work's context, and as ``asyncio.timeout``
    does) and leaving the block raises :class:`~tollgate.SlotLost` instead
    of the CancelledError. Otherwise the lease ends as AsyncLease's context
    manager ends it. ``extensions`` counts the accepted extensions."""

    def __init__(self, acquire: Callable[[], Any], lease_ttl: Optional[Duration]) -> None:
        self._acquire = acquire
        self._lease_ttl = lease_ttl
        self.lease: Optional[AsyncLease] = None
        self.ttl = 0.0
        self.extensions = 0
        self.lost: Optional[E.TollgateError] = None
        self._task: Optional["asyncio.Task[Any]"] = None
        self._keeper: Optional["asyncio.Task[None]"] = None
        self._exiting = False
        self._cancelled = False

    async def __aenter__(self) -> AsyncLease:
        lease = await self._acquire()
        self.lease, self.ttl = lease, slot_ttl(lease, self._lease_ttl)
        self._task = asyncio.current_task()
        if self.ttl > 0:
            self._keeper = asyncio.ensure_future(self._keep_alive())
        return lease

    async def _keep_alive(self) -> None:
        lease = self.lease
        assert lease is not None
        while True:
            await asyncio.sleep(self.ttl / 2)
            try:
                await lease.extend(self.ttl)
                self.extensions += 1
            except E.LeaseClosed as err:
                if ended_here(lease) or self._exiting:
                    return
                self.lost = err
                if self._task is not None:
                    self._cancelled = True
                    self._task.cancel()
                return
            except E.TollgateError:
                continue

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> bool:
        self._exiting = True
        if self._keeper is not None:
            self._keeper.cancel()  # an extension in flight is abandoned: the lease ends next
        lease = self.lease
        assert lease is not None
        if self.lost is not None:
            lost = self.lost
            if self._cancelled and sys.version_info >= (3, 11) and self._task is not None:
                self._task.uncancel()
            if exc is None or isinstance(exc, asyncio.CancelledError):
                raise E.SlotLost(f"lease {lease.id}: slot lost while its work ran: {lost}", status=lost.status,
                                 code=lost.code, reason=lost.reason, body=lost.body) from lost
            if hasattr(exc, "add_note"):
                exc.add_note(f"tollgate: the slot of lease {lease.id} was lost while the work ran: {lost}")  # type: ignore[union-attr]
            return False
        await lease.__aexit__(exc_type, exc, tb)
        return False


class AsyncClient:
    """Calls one Tollgate server from asyncio code: the methods of
    :class:`~tollgate.Client`, as coroutines, with the same arguments,
    results and errors; leases are :class:`AsyncLease`. Use it from one
    event loop at a time; ``await client.close()`` (or ``async with
    AsyncClient(...) as client``) closes its idle connections.

    The arguments are Client's, but the client connects directly: HTTP
    proxies are not supported (``proxies`` is not taken).

    Calls that are safe to repeat are sent again when no answer comes back,
    as Client's. A task cancelled while its call is in flight closes that
    call's connection; an acquire cancelled after it was sent may have been
    granted: when the client made its idempotency key up, it rolls that
    lease back in the background, as it does every acquire of unknown
    outcome (Client's); otherwise the lease, which nobody holds, ends at
    its expiry (lease_ttl). The rollbacks are tasks of the event loop the
    acquire ran in; ``on_abandon`` is called there (not on a thread).
    """

    def __init__(self, base_url: str, api_key: Optional[str] = None, namespace: Optional[str] = None,
                 timeout: Optional[float] = DEFAULT_TIMEOUT, *, principal: Optional[str] = None,
                 user_agent: str = DEFAULT_USER_AGENT, ssl_context: Any = None, idempotency_keys: bool = True,
                 on_abandon: Optional[Callable[[Abandoned], Any]] = None) -> None:
        # The sync client validates the arguments, builds the headers, and
        # runs the administrative calls (in a worker thread).
        self._sync = Client(base_url, api_key, namespace, timeout, principal=principal, user_agent=user_agent,
                            ssl_context=ssl_context, proxies={}, idempotency_keys=idempotency_keys)
        self.base_url, self.namespace, self.timeout = self._sync.base_url, self._sync.namespace, self._sync.timeout
        self._keys = self._sync._keys
        self._releases = AsyncReleases()
        self._http = AsyncTransport(self.base_url, self._sync._http.headers, self.timeout, ssl_context)
        self._abandoner = AsyncAbandoner(self._roll_back_abandoned, on_abandon)

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r}, namespace={self.namespace!r})"

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the idle connections."""
        await self._http.close()

    async def _call(self, method: str, path: str, *, query: Any = None, body: Any = None, route: str = "",
                    retry: Optional[bool] = None, principal: Optional[str] = None) -> Tuple[int, Any]:
        a = await self._http.send(method, path, query=query, body=body, route=route, retry=retry,
                                  headers=_principal_header(principal))
        return a.status, a.data

    # ------------------------------------------------------------------
    # Acquire and leases

    async def _acquire(self, entity: str, resource: str, consume: Mapping[str, int], commit: bool,
                       limits: Optional[Sequence[str]], mode: Optional[str], lease_ttl: Optional[Duration],
                       key: Optional[str]) -> Tuple[Dict[str, Any], bool]:
        call = self._sync._acquire_call(entity, resource, consume, commit, limits, mode, lease_ttl, key)
        mine = _own_key(call, key)
        try:
            a: Answer = await self._http.send(call.pop("method"), call.pop("path"), **call)
            answer, replayed = Client._acquired(a)
        except (E.TollgateError, asyncio.CancelledError) as err:
            if mine and unknown_outcome(err):
                self._abandoner.abandon(mine, entity, resource)  # granted unseen, maybe: see _abandon.py
            raise
        if mine and answer.get("degraded") is True:
            self._abandoner.abandon(mine, entity, resource)
        return answer, replayed

    async def _roll_back_abandoned(self, lease_id: str) -> None:
        """As Client._roll_back_abandoned."""
        await self._http.send("POST", lease_path(lease_id, "rollback"), route="lease", retry=True,
                              timeout=self.timeout if self.timeout is not None else ABANDON_TIMEOUT)

    async def acquire(self, entity: str, resource: str, consume: Mapping[str, int], *,
                      limits: Optional[Sequence[str]] = None, on_unavailable: Optional[str] = None,
                      lease_ttl: Optional[Duration] = None, idempotency_key: Optional[str] = None) -> AsyncLease:
        """As Client.acquire; the lease is an :class:`AsyncLease`."""
        answer, replayed = await self._acquire(entity, resource, consume, False, limits, on_unavailable, lease_ttl,
                                               idempotency_key)
        lease = AsyncLease(self, entity, resource, answer)
        lease.replayed = replayed
        return lease

    async def acquire_and_commit(self, entity: str, resource: str, consume: Mapping[str, int], *,
                                 limits: Optional[Sequence[str]] = None, on_unavailable: Optional[str] = None,
                                 idempotency_key: Optional[str] = None) -> Grant:
        """As Client.acquire_and_commit."""
        d, replayed = await self._acquire(entity, resource, consume, True, limits, on_unavailable, None,
                                          idempotency_key)
        return Grant(consumed=_counts(d, "consumed"), statuses=statuses(d), degraded=bool(d.get("degraded", False)),
                     replayed=replayed)

    async def wait(self, entity: str, resource: str, consume: Mapping[str, int], max_wait: Duration, *,
                   limits: Optional[Sequence[str]] = None, on_unavailable: Optional[str] = None,
                   lease_ttl: Optional[Duration] = None) -> AsyncLease:
        """As Client.wait, sleeping with asyncio.sleep (cancel the task to
        stop waiting); a lease of this client giving back the slot waited
        for wakes it at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, seconds(max_wait, "max_wait"))
        while True:
            woken = self._releases.event(entity, resource)
            try:
                return await self.acquire(entity, resource, consume, limits=limits, on_unavailable=on_unavailable,
                                          lease_ttl=lease_ttl)
            except E.RateLimitExceeded as denied:
                sleep, least = denied.backoff()
                left = deadline - loop.time()
                if left <= 0 or least > left:
                    raise
                if denied.waits:  # a slot: a lease of this client giving it back wakes the wait
                    await self._releases.sleep(woken, min(sleep, left))
                    continue
            finally:
                self._releases.forget(entity, resource, woken)
            await asyncio.sleep(min(sleep, left))

    def _released(self, entity: str, resource: str) -> None:
        """A lease of this client gave back slots of entity and resource."""
        self._releases.released(entity, resource)

    def slot(self, entity: str, resource: str, consume: Mapping[str, int], *, wait: Optional[Duration] = None,
             limits: Optional[Sequence[str]] = None, on_unavailable: Optional[str] = None,
             lease_ttl: Optional[Duration] = None) -> AsyncSlot:
        """Hold a slot while a block runs, keeping its lease alive, as Go's
        WithSlot::

            async with client.slot("key-1", "batch", {"jobs": 1}, wait=60) as lease:
                await run_a_long_job()   # may outlast the lease's expiry

        As Client.slot, but if an extension finds the lease gone the block
        is cancelled, and SlotLost is raised when it ends. See
        :class:`AsyncSlot`."""

        async def acquire() -> AsyncLease:
            if wait is not None:
                return await self.wait(entity, resource, consume, wait, limits=limits, on_unavailable=on_unavailable,
                                       lease_ttl=lease_ttl)
            return await self.acquire(entity, resource, consume, limits=limits, on_unavailable=on_unavailable,
                                      lease_ttl=lease_ttl)

        return AsyncSlot(acquire, lease_ttl)

    async def available(self, entity: str, resource: str, *, limits: Optional[Sequence[str]] = None) -> List[LimitStatus]:
        """As Client.available."""
        _, answer = await self._call("GET", V1 + "/available", query=_available_query(entity, resource, limits))
        return statuses(_obj(answer, "available answer"))

    async def time_until_available(self, entity: str, resource: str, consume: Mapping[str, int], *,
                                   limits: Optional[Sequence[str]] = None) -> float:
        """As Client.time_until_available."""
        _, answer = await self._call("GET", V1 + "/available", query=_until_query(entity, resource, consume, limits))
        return _until_answer(answer)

    async def resume_lease(self, lease_id: str) -> AsyncLease:
        """As Client.resume_lease."""
        d = _obj(await self._lease_call("GET", lease_id, None), "lease")
        return AsyncLease(self, _str(d, "entity"), _str(d, "resource"), d)

    async def _lease_call(self, method: str, lease_id: str, action: Optional[str], body: Any = None,
                          principal: Optional[str] = None) -> Any:
        _, answer = await self._call(method, lease_path(lease_id, action), body=body, route="lease",
                                     retry=action != "adjust", principal=principal)
        return answer

    async def list_leases(self, entity: Optional[str] = None, resource: Optional[str] = None, *,
                          after: Optional[str] = None, limit: int = 100) -> Tuple[List[LeaseInfo], Optional[str]]:
        """As Client.list_leases."""
        q = _page_query(entity=entity, resource=resource, after=after, limit=limit)
        _, answer = await self._call("GET", V1 + "/leases", query=q)
        return _leases_page(answer)

    # ------------------------------------------------------------------
    # Reservations and penalties

    async def reserve(self, entity: str, resource: str, id: str, consume: Optional[Mapping[str, int]] = None, *,
                      limits: Optional[Sequence[str]] = None, on_unavailable: Optional[str] = None,
                      ttl: Optional[Duration] = None, principal: Optional[str] = None) -> Reserved:
        """As Client.reserve."""
        body = _reserve_body(entity, resource, id, consume, limits, on_unavailable, ttl)
        status, answer = await self._call("POST", V1 + "/reservations", body=body, route="reservation",
                                          principal=principal)
        return Reserved.from_answer(answer, new=(status == 201))

    async def release(self, id: str, *, principal: Optional[str] = None) -> None:
        """As Client.release."""
        await self._call("DELETE", V1 + "/reservations/" + seg(id), route="reservation", principal=principal)

    async def get_reservation(self, id: str) -> Reservation:
        """As Client.get_reservation."""
        _, answer = await self._call("GET", V1 + "/reservations/" + seg(id), route="reservation")
        return Reservation.from_json(answer)

    async def list_reservations(self, entity: str, resource: Optional[str] = None, *, after: Optional[str] = None,
                                limit: int = 100) -> Tuple[List[Reservation], Optional[str]]:
        """As Client.list_reservations."""
        q = _page_query(entity=entity, resource=resource, after=after, limit=limit)
        _, answer = await self._call("GET", V1 + "/reservations", query=q, route="reservation")
        return _reservations_page(answer)

    async def iter_reservations(self, entity: str, resource: Optional[str] = None, *,
                                page_size: int = 100) -> AsyncIterator[Reservation]:
        """As Client.iter_reservations: ``async for r in client.iter_reservations(...)``."""
        after: Optional[str] = None
        while True:
            page, after = await self.list_reservations(entity, resource, after=after, limit=page_size)
            for r in page:
                yield r
            if not after:
                return

    async def penalize(self, entity: str, resource: str, limits: Sequence[str], *,
                       retry_after: Optional[Duration] = None, until: Optional[datetime] = None, reason: str = "",
                       principal: Optional[str] = None) -> None:
        """As Client.penalize."""
        await self._penalize_body(entity, resource, penalty_body(limits, retry_after, until, reason), principal)

    async def _penalize_body(self, entity: str, resource: str, body: Dict[str, Any],
                             principal: Optional[str] = None) -> None:
        await self._call("POST", V1 + "/penalize", body=dict(body, entity=entity, resource=resource),
                         principal=principal)

    async def reset(self, entity: str, resource: str, *, limits: Optional[Sequence[str]] = None, reason: str = "",
                    principal: Optional[str] = None) -> None:
        """As Client.reset."""
        await self._call("POST", V1 + "/reset", body=_reset_body(entity, resource, limits, reason),
                         principal=principal)

    async def health(self) -> str:
        """As Client.health."""
        _, answer = await self._call("GET", "/healthz")
        return _str(_obj(answer, "health answer"), "status")

    async def ready(self) -> str:
        """As Client.ready."""
        _, answer = await self._call("GET", "/readyz")
        return _str(_obj(answer, "readiness answer"), "status")

    # ------------------------------------------------------------------
    # Decorator

    def rate_limit(self, *, entity: Union[str, arg, Callable[..., str]], resource: Union[str, arg, Callable[..., str]],
                   consume: Union[Mapping[str, int], arg, Callable[..., Mapping[str, int]]],
                   wait: Optional[Duration] = None, limits: Optional[Sequence[str]] = None,
                   on_unavailable: Optional[str] = None, lease_ttl: Optional[Duration] = None) -> Callable[[F], F]:
        """Decorate a coroutine function so that each call runs holding a
        lease, as Client.rate_limit, without a thread: acquire (or wait),
        await the function, commit; roll back when it raises or is
        cancelled."""

        def decorate(fn: F) -> F:
            if not inspect.iscoroutinefunction(fn):
                raise E.ValidationError(f"AsyncClient.rate_limit decorates coroutine functions; "
                                        f"{fn.__qualname__} is not one (use Client.rate_limit)", field="fn",
                                        value=fn.__qualname__)
            get_entity = _resolver(fn, "entity", entity)
            get_resource = _resolver(fn, "resource", resource)
            get_consume = _resolver(fn, "consume", consume)

            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                e, r, c = get_entity(args, kwargs), get_resource(args, kwargs), get_consume(args, kwargs)
                if wait is not None:
                    lease = await self.wait(e, r, c, wait, limits=limits, on_unavailable=on_unavailable,
                                            lease_ttl=lease_ttl)
                else:
                    lease = await self.acquire(e, r, c, limits=limits, on_unavailable=on_unavailable,
                                               lease_ttl=lease_ttl)
                async with lease:
                    return await fn(*args, **kwargs)

            return wrapper  # type: ignore[return-value]

        return decorate


# The administrative calls: Client's, run in a worker thread.

_NATIVE = {name for name, v in vars(AsyncClient).items() if not name.startswith("_")}
_SKIP = {"get_lease"}  # deprecated in Client: use resume_lease


def _threaded(name: str) -> Callable[..., Any]:
    method = getattr(Client, name)

    @functools.wraps(method)
    async def call(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self._sync, name), *args, **kwargs)

    call.__doc__ = f"As Client.{name} (run in a worker thread)."
    return call


def _threaded_iter(name: str) -> Callable[..., Any]:
    method = getattr(Client, name)

    @functools.wraps(method)
    async def call(self: AsyncClient, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        it = getattr(self._sync, name)(*args, **kwargs)
        done = object()
        while True:
            item = await asyncio.to_thread(next, it, done)
            if item is done:
                return
            yield item

    call.__doc__ = f"As Client.{name}: ``async for`` (each page read in a worker thread)."
    return call


for _name, _v in list(vars(Client).items()):
    if _name.startswith("_") or _name in _NATIVE or _name in _SKIP or not callable(_v):
        continue
    setattr(AsyncClient, _name, (_threaded_iter if inspect.isgeneratorfunction(_v) else _threaded)(_name))
