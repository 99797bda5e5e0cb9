"""The pure parts of the calls that Client and AsyncClient both make: the
queries and bodies they send and how they read the answers (no I/O)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import errors as E
from ._http import seg
from ._util import Duration, consume_body, limits_list, ttl_ms
from ._util import on_unavailable as _mode
from .types import LeaseInfo, Reservation, _list, _obj, _str

V1 = "/v1"

def lease_path(lease_id: str, action: Optional[str]) -> str:
    return V1 + "/leases/" + seg(lease_id) + ("/" + action if action else "")


def _available_query(entity: str, resource: str, limits: Optional[Sequence[str]]) -> List[Tuple[str, str]]:
    q: List[Tuple[str, str]] = [("entity", entity), ("resource", resource)]
    for lim in limits_list(limits) or []:
        q.append(("limits", lim))
    return q


def _until_query(entity: str, resource: str, consume: Mapping[str, int],
                 limits: Optional[Sequence[str]]) -> List[Tuple[str, str]]:
    if not consume:
        raise E.ValidationError("consume: must name at least one limit", field="consume")
    q = _available_query(entity, resource, limits)
    for name, amount in consume.items():
        q.append(("consume", f"{name}:{int(amount)}"))
    return q


def _until_answer(answer: Any) -> float:
    ms = _obj(answer, "available answer").get("retry_after_ms")
    if not isinstance(ms, int):
        raise E.BadResponse("no retry_after_ms in the answer: a server older than this client")
    return ms / 1000.0


def _reserve_body(entity: str, resource: str, id: str, consume: Optional[Mapping[str, int]],
                  limits: Optional[Sequence[str]], on_unavailable: Optional[str],
                  ttl: Optional[Duration]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"entity": entity, "resource": resource, "id": id}
    c = consume_body(consume)
    if c:
        body["consume"] = c
    lim = limits_list(limits)
    if lim:
        body["limits"] = lim
    m = _mode(on_unavailable)
    if m:
        body["on_unavailable"] = m
    ms = ttl_ms(ttl, "ttl_ms")
    if ms is not None:
        body["ttl_ms"] = ms
    return body


def _reset_body(entity: str, resource: str, limits: Optional[Sequence[str]], reason: str) -> Dict[str, Any]:
    body: Dict[str, Any] = {"entity": entity, "resource": resource}
    lim = limits_list(limits)
    if lim is not None:
        if not lim:
            raise E.ValidationError("invalid limits: name at least one limit, or None for every refilling one",
                                    field="limits")
        body["limits"] = lim
    if reason:
        body["reason"] = reason
    return body


def _page_query(*, entity: Optional[str], resource: Optional[str], after: Optional[str], limit: int) -> Dict[str, Any]:
    q: Dict[str, Any] = {"limit": limit}
    for k, v in (("entity", entity), ("resource", resource), ("after", after)):
        if v:
            q[k] = v
    return q


def _reservations_page(answer: Any) -> Tuple[List[Reservation], Optional[str]]:
    d = _obj(answer, "reservations answer")
    return [Reservation.from_json(r) for r in _list(d, "reservations")], (_str(d, "next") or None)


def _leases_page(answer: Any) -> Tuple[List[LeaseInfo], Optional[str]]:
    d = _obj(answer, "leases answer")
    return [LeaseInfo.from_json(x) for x in _list(d, "leases")], (_str(d, "next") or None)
