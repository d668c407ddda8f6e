"""The upstream keys removed from logged bodies: read with the configuration, decrypted once each."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from accounts import secrets
from accounts.config_file import load
from accounts.models import Account
from gateway.app import Gateway
from gateway.edge.routes import RouteTable
from gateway.log.knownsecrets import KnownSecrets
from gateway.options import Options
from gateway.state import SnapshotCache

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = ["0123456789abcdef0123456789abcdef-one", "0123456789abcdef0123456789abcdef-two"]


def pool(keys: list[str]) -> None:
    load({"providers": [{"name": "p", "protocol": "openai_chat", "base_url": "http://127.0.0.1:9/v1",
                         "accounts": [{"label": f"a{i}", "api_key": k} for i, k in enumerate(keys)]}]})


def test_every_accounts_key_is_known_disabled_ones_too_and_each_is_decrypted_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool(KEYS)
    Account.objects.filter(label="a1").update(status=Account.DISABLED)
    decrypted: list[str] = []
    real = secrets.decrypt
    monkeypatch.setattr(secrets, "decrypt", lambda token: decrypted.append(token) or real(token))
    known = KnownSecrets()
    first = known.reload()
    assert all(k not in first.sub(f"a {k} b") for k in KEYS) and len(decrypted) == 2
    assert known.reload() is first and len(decrypted) == 2  # nothing changed: nothing rebuilt
    third = Account(provider=Account.objects.get(label="a0").provider, label="a2")
    third.set_secret("fedcba9876543210fedcba9876543210-three")
    third.save()
    assert "-three" not in known.reload().sub("a fedcba9876543210fedcba9876543210-three b")
    assert len(decrypted) == 3  # only the new key


def test_the_log_writer_of_an_app_with_body_logging_removes_them_from_kept_bodies() -> None:
    pool(KEYS)
    gw = Gateway(Options(log_bodies=True, config_ttl=0), RouteTable([]))
    assert gw.config.known_secrets is not None and gw.log.known_secrets is gw.config.known_secrets

    async def read_config() -> Any:
        return await gw.config.get()

    asyncio.run(read_config())
    assert len(gw.config.known_secrets.current) == len(KEYS)  # one form each: nothing in them needs escaping
    kept = gw.log.keep_body(f'{{"messages": [{{"content": "my key {KEYS[0]}"}}]}}'.encode())
    assert KEYS[0] not in kept and "[redacted]" in kept


def test_without_body_logging_no_key_is_read() -> None:
    gw = Gateway(Options(log_bodies=False), RouteTable([]))
    assert gw.config.known_secrets is None and gw.log.keep_body("anything") == ""
    assert not SnapshotCache(0).known_secrets
