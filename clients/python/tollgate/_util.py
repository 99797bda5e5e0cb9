"""Argument checks and conversions shared by the client's modules."""

from __future__ import annotations

import math
import re
import secrets
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from .errors import ValidationError

#: A duration: seconds (int or float) or a timedelta.
Duration = Union[int, float, timedelta]

_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def seconds(d: Duration, field: str) -> float:
    if isinstance(d, timedelta):
        return d.total_seconds()
    if isinstance(d, bool) or not isinstance(d, (int, float)) or math.isnan(d):
        raise ValidationError(f"invalid {field}: want seconds or a timedelta", field=field, value=repr(d)[:80])
    return float(d)


def ttl_ms(d: Optional[Duration], field: str) -> Optional[int]:
    """A TTL in whole milliseconds, rounded up; None for None or <= 0."""
    if d is None:
        return None
    s = seconds(d, field)
    if s <= 0:
        return None
    return int(math.ceil(s * 1000))


def consume_body(consume: Optional[Mapping[str, int]], allow_negative: bool = False, field: str = "consume") -> Dict[str, int]:
    """Check a name -> whole tokens mapping (the server checks the rest)."""
    if consume is None:
        return {}
    if not isinstance(consume, Mapping):
        raise ValidationError(f"invalid {field}: want a mapping of limit name to whole tokens", field=field,
                              value=repr(consume)[:80])
    out: Dict[str, int] = {}
    for name, n in consume.items():
        if not isinstance(name, str) or not name:
            raise ValidationError(f"invalid {field}: limit names are non-empty strings", field=field, value=repr(name)[:80])
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValidationError(f"invalid {field}.{name}: want whole tokens (an int)", field=f"{field}.{name}",
                                  value=repr(n)[:80])
        if n < 0 and not allow_negative:
            raise ValidationError(f"invalid {field}.{name}: must not be negative", field=f"{field}.{name}", value=str(n))
        out[name] = n
    return out


def limits_list(limits: Optional[Sequence[str]], field: str = "limits") -> Optional[list]:
    """Limit texts, e.g. ["rpm:100", "inflight:5/concurrent"]; the server
    parses them. A bare string is refused (it would iterate as characters)."""
    if limits is None:
        return None
    if isinstance(limits, (str, bytes)) or not all(isinstance(x, str) for x in limits):
        raise ValidationError(f"invalid {field}: want a list of limit strings such as [\"rpm:100\"]",
                              field=field, value=repr(limits)[:80])
    return list(limits)


def on_unavailable(mode: Optional[str]) -> Optional[str]:
    if mode is None or mode == "":
        return None
    if mode not in ("block", "allow"):
        raise ValidationError('invalid on_unavailable: want "block" or "allow"', field="on_unavailable", value=str(mode)[:80])
    return mode


#: The most characters an idempotency key may have (the server's bound).
MAX_IDEMPOTENCY_KEY_LEN = 255


def new_idempotency_key() -> str:
    """A key for one logical acquire: 128 random bits, as the Go client's."""
    return "tgc-" + secrets.token_hex(16)


def idempotency_key(key: Any) -> str:
    """Check a caller's idempotency key: 1 to 255 printable ASCII characters,
    as the server wants, and no space at either end (HTTP drops those, so
    the server would see another key, or none)."""
    ok = isinstance(key, str) and 0 < len(key) <= MAX_IDEMPOTENCY_KEY_LEN and all(" " <= c <= "~" for c in key)
    if not ok:
        raise ValidationError(f"invalid idempotency_key: want 1 to {MAX_IDEMPOTENCY_KEY_LEN} printable ASCII characters",
                              field="idempotency_key", value=repr(key)[:80])
    if key != key.strip(" "):
        raise ValidationError("invalid idempotency_key: no space at the start or the end", field="idempotency_key",
                              value=key[:80])
    return key


def namespace(ns: str) -> str:
    if not isinstance(ns, str) or not _NAMESPACE.match(ns) or len(ns.encode()) > 64:
        raise ValidationError(f"invalid namespace {ns!r}: want ^[A-Za-z0-9][A-Za-z0-9_.-]*$, at most 64 bytes",
                              field="namespace", value=str(ns)[:80])
    return ns


def unix_ms_ceil(t: datetime) -> int:
    """A datetime as Unix milliseconds, rounded up (a penalty lasts at least
    until then). A naive datetime is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    us = (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    return -((-us) // 1000)


def unix_ms_floor(t: datetime) -> int:
    """A datetime as Unix milliseconds, rounded down (as the server
    truncates a time bound). A naive datetime is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return ((t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)) // 1000


def penalty_body(limits: Sequence[str], retry_after: Optional[Duration], until: Optional[datetime], reason: str) -> Dict[str, Any]:
    lim = limits_list(limits)
    if not lim:
        raise ValidationError("invalid limits: name at least one rate limit to penalize", field="limits")
    if (retry_after is None) == (until is None):
        raise ValidationError("give exactly one of retry_after and until", field="retry_after_ms")
    body: Dict[str, Any] = {"limits": lim}
    if retry_after is not None:
        ms = ttl_ms(retry_after, "retry_after_ms")
        if ms is None:
            raise ValidationError("invalid retry_after_ms: must be positive", field="retry_after_ms", value=str(retry_after))
        body["retry_after_ms"] = ms
    else:
        if not isinstance(until, datetime):
            raise ValidationError("invalid until_ms: want a datetime", field="until_ms", value=repr(until)[:80])
        body["until_ms"] = unix_ms_ceil(until)
    if reason:
        body["reason"] = reason
    return body
