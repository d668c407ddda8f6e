"""Managed settings (``GET /managed/settings``): which policy a developer gets, its checksum, and the
answer to a poll, as plain functions of plain values.

The checksum is the client's own: ``sha256:`` and the hex SHA-256 of the settings as JSON with the
keys sorted at every level and no whitespace. The client computes it with JavaScript's
``JSON.stringify``, so the encoding here follows that function where Python's ``json`` differs:
object keys sort by UTF-16 code units, integral floats print without ``.0``, exponents as
``1e-7`` / ``1e+21``; strings are escaped alike (``ensure_ascii=False``).
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from dataclasses import dataclass
from typing import Any


def canonical(value: Any) -> str:
    """``value`` as JavaScript's ``JSON.stringify`` writes it once every object's keys are sorted."""

    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]).encode("utf-16-be"))
        return "{" + ",".join(f"{_string(str(k))}:{canonical(v)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _number(x: float) -> str:
    """ECMAScript's Number::toString: shortest round-trip digits, as Python's repr finds them."""

    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    text = repr(x)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    exp = int(exponent)
    if -7 < exp < 21:  # JavaScript writes these without an exponent (Python from 1e-5 and 1e16 on)
        return format(Decimal(text), "f")
    return f"{mantissa}e{'+' if exp > 0 else '-'}{abs(exp)}"


def checksum(settings: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(settings).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Policy:
    uuid: str
    checksum: str
    settings: Any


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: dict[str, Any] | None


def _tags(if_none_match: str) -> list[str]:
    """The entity tags of an If-None-Match value, weak or strong, quotes removed."""

    tags = []
    for part in if_none_match.split(","):
        tag = part.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        tags.append(tag.strip('"'))
    return tags


def answer(policy: Policy | None, if_none_match: str | None) -> Answer:
    """The answer to a poll: 404 without a policy; 304 only to an If-None-Match that names this
    checksum; else the ``{uuid, checksum, settings}`` wrapper with the checksum, quoted, as ETag.

    ``If-None-Match: *`` (a Claude Desktop session asking whether settings exist) is answered as
    if it were absent, as the protocol asks: 200 or 404, never 304. No ``x-cc-gateway-version``
    goes with ``Cache-Control: no-store``: together they would tell that client a 304 means
    "settings that must not be missing" and a 404 "nothing for this session".
    """

    headers = {"Cache-Control": "private, no-cache"}
    if policy is None:
        return Answer(404, headers, None)
    headers["ETag"] = f'"{policy.checksum}"'
    if if_none_match and if_none_match.strip() != "*" and policy.checksum in _tags(if_none_match):
        return Answer(304, headers, None)
    return Answer(200, headers, {"uuid": policy.uuid, "checksum": policy.checksum, "settings": policy.settings})


def policy_for(team_id: int | None) -> Policy | None:
    """The team's own managed settings, else the default, else none."""

    from .models import ManagedSettings

    found = None
    if team_id is not None:
        found = ManagedSettings.objects.filter(team_id=team_id).first()
    if found is None:
        found = ManagedSettings.objects.filter(team__isnull=True).first()
    if found is None:
        return None
    return Policy(found.uuid, found.checksum, found.settings)


CURRENT, ACCEPTED, STALE, UNKNOWN, MISSING = "current", "accepted", "stale", "unknown", "missing"


def verdict(reported: str, team_id: int | None) -> str:
    """What a checksum a client reported says of its machine, against the policy its developer gets:
    current, accepted (a value ops listed as correct), stale (an earlier version), unknown, missing."""

    from .models import ManagedSettings, ManagedSettingsVersion

    if not reported:
        return MISSING
    policy = None
    if team_id is not None:
        policy = ManagedSettings.objects.filter(team_id=team_id).first()
    if policy is None:
        policy = ManagedSettings.objects.filter(team__isnull=True).first()
    if policy is None:
        return UNKNOWN
    if reported == policy.checksum:
        return CURRENT
    if reported in policy.accepted():
        return ACCEPTED
    if ManagedSettingsVersion.objects.filter(policy=policy, checksum=reported).exists():
        return STALE
    return UNKNOWN
