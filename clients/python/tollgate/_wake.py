"""Wake-ups of a client's waiters for slots its own leases give back.

A caller of ``wait`` refused for a concurrency or reserved limit sleeps
about a second (or until a holder's expiry) before it looks again; when a
lease of the same client ends and gives such tokens back, the waiters for
that entity and resource look again at once, as the Go client's do. Only
keys with a waiter are tracked, so nothing grows with keys nobody waits on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Dict, List, Tuple

_Key = Tuple[str, str]


class Releases:
    """The wake-ups of a thread-safe client."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiters: Dict[_Key, int] = {}
        self._seq: Dict[_Key, int] = {}

    def enter(self, entity: str, resource: str) -> None:
        """Registers a waiter on the key (before its first acquire)."""
        with self._cond:
            k = (entity, resource)
            self._waiters[k] = self._waiters.get(k, 0) + 1
            self._seq.setdefault(k, 0)

    def leave(self, entity: str, resource: str) -> None:
        with self._cond:
            k = (entity, resource)
            n = self._waiters.get(k, 0) - 1
            if n > 0:
                self._waiters[k] = n
            else:
                self._waiters.pop(k, None)
                self._seq.pop(k, None)

    def seq(self, entity: str, resource: str) -> int:
        """The key's count of releases, read before an acquire."""
        with self._cond:
            return self._seq.get((entity, resource), 0)

    def released(self, entity: str, resource: str) -> None:
        """A lease of the client gave the key's slots back."""
        with self._cond:
            k = (entity, resource)
            if k in self._seq:
                self._seq[k] += 1
                self._cond.notify_all()

    def sleep(self, entity: str, resource: str, seq: int, pause: float) -> None:
        """Sleeps pause seconds, or until a release on the key since seq."""
        end = time.monotonic() + pause
        k = (entity, resource)
        with self._cond:
            while self._seq.get(k, seq) == seq:
                left = end - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)


class AsyncReleases:
    """The wake-ups of an asyncio client (one event loop)."""

    def __init__(self) -> None:
        self._events: Dict[_Key, List[asyncio.Event]] = {}

    def released(self, entity: str, resource: str) -> None:
        for ev in self._events.pop((entity, resource), []):
            ev.set()

    def event(self, entity: str, resource: str) -> asyncio.Event:
        """An event set by the key's next release: take it before the
        acquire, so that a release during it is not missed."""
        ev = asyncio.Event()
        self._events.setdefault((entity, resource), []).append(ev)
        return ev

    def forget(self, entity: str, resource: str, ev: asyncio.Event) -> None:
        evs = self._events.get((entity, resource))
        if evs and ev in evs:
            evs.remove(ev)
            if not evs:
                del self._events[(entity, resource)]

    async def sleep(self, ev: asyncio.Event, pause: float) -> None:
        """Sleeps pause seconds, or until ev is set."""
        try:
            await asyncio.wait_for(ev.wait(), pause)
        except asyncio.TimeoutError:
            pass
