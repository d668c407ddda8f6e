"""What the request path knows of a key's life (``gateway.state``): a rotated key is found by either
secret while the old one's grace lasts, an expired one and an old secret past its grace are refused
at the time itself (no change to the configuration needed), and a key carries its team."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.models import ApiKey, Team
from accounts.secrets import hash_client_key
from gateway.endpoints.auth import identify
from gateway.errors import AuthenticationFailed
from gateway.state import KeyInfo, Snapshot, TeamInfo, _find_key, _load
from tests.gateway.test_auth import Lookups

pytestmark = pytest.mark.django_db


def make_key(plain: str, **fields: object) -> ApiKey:
    key = ApiKey(name=plain[-10:], **fields)
    key.set_key(plain)
    key.save()
    return key


def test_a_rotated_key_is_known_by_both_secrets_until_the_grace_ends() -> None:
    key = make_key("gw-state-old-secret")
    new = key.rotate(dt.timedelta(hours=1))
    snap = _load()
    current, old = snap.keys[hash_client_key(new)], snap.keys[hash_client_key("gw-state-old-secret")]
    assert current.id == old.id == key.pk and current.grace_until is None
    assert old.grace_until is not None and old.grace_until == pytest.approx(time.time() + 3600, abs=5)
    assert old.refused_now(time.time()) is None
    assert "rotated" in (old.refused_now(old.grace_until) or "")

    key.previous_key_until = timezone.now() - dt.timedelta(seconds=1)
    key.save()
    assert hash_client_key("gw-state-old-secret") not in _load().keys  # past it: found afresh, refused, named
    found = _find_key(hash_client_key("gw-state-old-secret"))
    assert found is not None and found.id == key.pk and found.refused_now(time.time()) is not None
    assert _find_key(hash_client_key(new)) == current


def test_a_second_rotation_ends_the_first_ones_grace() -> None:
    key = make_key("gw-state-first-secret")
    second = key.rotate(dt.timedelta(hours=1))
    key.rotate(dt.timedelta(hours=1))
    assert _find_key(hash_client_key("gw-state-first-secret")) is None
    assert _find_key(hash_client_key(second)) is not None


def test_an_expired_key_is_refused_at_its_time_and_named() -> None:
    info = KeyInfo(7, "soon", (), None, None, expires_at=time.time() + 3600)
    snap = Snapshot(keys={hash_client_key("gw-soon"): info})
    assert asyncio.run(identify("gw-soon", snap, Lookups())) == info
    past = dataclasses.replace(info, expires_at=time.time() - 1)
    with pytest.raises(AuthenticationFailed, match="This API key expired at ") as refused:
        asyncio.run(identify("gw-soon", Snapshot(keys={hash_client_key("gw-soon"): past}), Lookups()))
    assert refused.value.refused_key == past and refused.value.headers["x-should-retry"] == "false"


def test_a_key_carries_its_teams_budgets_and_models_and_an_inactive_team_makes_it_inactive() -> None:
    team = Team.objects.create(name="t", allowed_models=["gpt-*"], usd_budget_day=Decimal("2.5"))
    key = make_key("gw-state-team-key", team=team)
    info = _load().keys[key.key_hash]
    assert info.team == TeamInfo(team.pk, "t", ("gpt-*",), (("day", 2_500_000),)) and info.team_id == team.pk
    team.active = False
    team.save()
    assert key.key_hash not in _load().keys
    found = _find_key(key.key_hash)
    assert found is not None and not found.active
