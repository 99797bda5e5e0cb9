"""The @rate_limit decorator, like the reference limiter's: each call of
the decorated function runs holding a lease."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, TypeVar, Union

from .errors import ValidationError

if TYPE_CHECKING:
    from ._util import Duration
    from .client import Client
    from .lease import Lease

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["rate_limit", "arg"]


class arg:
    """Names an argument of the decorated function, by name, whether the
    caller passes it by position or keyword or leaves its default (the
    reference limiter's account_id_key and account_id_pos in one)::

        @client.rate_limit(entity=tollgate.arg("account_id"), resource="search", consume={"rpm": 1})
        def search(query, account_id="anonymous"): ...
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"tollgate.arg({self.name!r})"


def _resolver(fn: Callable[..., Any], what: str, spec: Any) -> Callable[[tuple, dict], Any]:
    """How to get entity, resource or consume from a call's arguments."""
    if isinstance(spec, arg):
        sig = inspect.signature(fn)
        if spec.name not in sig.parameters:
            raise ValidationError(f"invalid {what}: {fn.__qualname__} has no argument {spec.name!r}",
                                  field=what, value=spec.name)

        def pick(args: tuple, kwargs: dict) -> Any:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return bound.arguments[spec.name]

        return pick
    if callable(spec):
        return lambda args, kwargs: spec(*args, **kwargs)
    return lambda args, kwargs: spec


def rate_limit(
    client: "Client",
    *,
    entity: Union[str, arg, Callable[..., str]],
    resource: Union[str, arg, Callable[..., str]],
    consume: Union[Mapping[str, int], Callable[..., Mapping[str, int]]],
    wait: Optional["Duration"] = None,
    limits: Optional[Sequence[str]] = None,
    on_unavailable: Optional[str] = None,
    lease_ttl: Optional["Duration"] = None,
) -> Callable[[F], F]:
    """Decorate a function so that each call first acquires ``consume`` for
    ``entity`` and ``resource``, then runs, then commits the lease (or rolls
    it back when the function raises)::

        @client.rate_limit(entity=lambda user, prompt: user, resource="openai/gpt-4o",
                           consume={"rpm": 1}, wait=30)
        def complete(user, prompt): ...

    entity, resource and consume may each be a value, a callable of the
    decorated function's arguments, or :class:`tollgate.arg` naming one of
    them. With ``wait`` (seconds or timedelta) a denied call waits and
    retries for up to that long (Client.wait); without it a denial raises
    RateLimitExceeded at once and the function does not run. limits,
    on_unavailable and lease_ttl are acquire()'s. Coroutine functions are
    supported: the HTTP calls then run in a worker thread
    (asyncio.to_thread).
    """

    def decorate(fn: F) -> F:
        get_entity = _resolver(fn, "entity", entity)
        get_resource = _resolver(fn, "resource", resource)
        get_consume = _resolver(fn, "consume", consume)

        def acquire(args: tuple, kwargs: dict) -> "Lease":
            e, r, c = get_entity(args, kwargs), get_resource(args, kwargs), get_consume(args, kwargs)
            if wait is not None:
                return client.wait(e, r, c, wait, limits=limits, on_unavailable=on_unavailable, lease_ttl=lease_ttl)
            return client.acquire(e, r, c, limits=limits, on_unavailable=on_unavailable, lease_ttl=lease_ttl)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                lease = await asyncio.to_thread(acquire, args, kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException:
                    await asyncio.to_thread(lease.__exit__, *sys.exc_info())
                    raise
                await asyncio.to_thread(lease.__exit__, None, None, None)
                return result

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with acquire(args, kwargs):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
