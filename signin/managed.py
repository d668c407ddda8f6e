"""Managed settings (``GET /managed/settings``): which policy a developer gets, its checksum
(``signin.checksum``), and the answer to a poll, as plain functions of plain values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
