"""A change takes effect on the very next request, on every process (accounts.configversion, gateway.configwatch).

The gateways here run with production's TTLs (configuration cached 2 s, re-read in the background),
so nothing but the change's own signal can make the next request see it: a key deactivated in
the gateway's own admin, or through the ORM in another process (as ``loadconfig`` or a second admin
does), is refused by the next request; a new alias routes on its first; a new rate limit, USD
budget or provider setting applies to the next. On PostgreSQL with several gateway processes, a
key revoked through one is refused by the other on its very next request.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import httpx
import openai
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from accounts.config_file import load
from accounts.models import ApiKey, ModelAlias, Provider, RequestLog
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import PRODUCTION_TTLS, Server, database_url, free_port, gateway_processes, seen

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "up-openai_chat/mock-text"
PRICES = {"mock-*": {"input": 1000, "output": 1000}}  # about $0.007 an answer


def chat(gateway: Server, model: str = MODEL, key: str = CLIENT_KEY) -> int:
    """The status of one chat request through the official SDK (200 when served)."""

    try:
        clients.openai_client(gateway.url, key).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}])
    except openai.APIStatusError as refused:
        return refused.status_code
    return 200


class _Form(HTMLParser):
    """The fields of the admin's change form, as a browser would submit them untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") == "checkbox":
                if "checked" in a:
                    self.fields[name] = a.get("value") or "on"
            else:
                self.fields[name] = a.get("value", "")
        elif tag == "select" and name:
            self._select = name
            self.fields.setdefault(name, "")
        elif tag == "option" and self._select and "selected" in a:
            self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields[name] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data.lstrip("\n") if not self.fields[self._textarea] else data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def staff_session() -> dict[str, str]:
    """A staff member's session cookie, valid on any gateway of the test database."""

    user = User.objects.create_superuser(f"ops-{uuid.uuid4().hex[:6]}", "ops@example.com", "unused-password")
    client = Client()
    client.force_login(user)
    return {"sessionid": client.cookies["sessionid"].value}


def edit_in_admin(gateway: Server, cookies: dict[str, str], key: ApiKey, **changes: str | None) -> None:
    """Open the key's change page in the gateway's admin, change fields (None unticks), save."""

    url = f"{gateway.url}/admin/accounts/apikey/{key.pk}/change/"
    with httpx.Client(cookies=cookies, timeout=10.0) as http:
        page = http.get(url)
        assert page.status_code == 200, page.text[:300]
        form = _Form()
        form.feed(page.text)
        fields = {**form.fields, "_save": "Save"}
        for name, value in changes.items():
            if value is None:
                fields.pop(name, None)
            else:
                fields[name] = value
        saved = http.post(url, data=fields, headers={"Referer": url})
    assert saved.status_code == 302, saved.text[:2000]  # back to the list: saved


@pytest.fixture
def ready(transactional_db: Any, mock_upstream: Server, production_gateway: Server) -> Server:
    load(pool_config(mock_upstream))
    seen(production_gateway)
    assert production_gateway.config_ttl >= 1.0  # production's: only the change's signal can explain what follows
    return production_gateway


def test_a_key_deactivated_in_the_gateways_admin_is_refused_by_the_very_next_request(ready: Server) -> None:
    cookies = staff_session()
    key = ApiKey.objects.get(name="e2e")
    assert chat(ready) == 200
    edit_in_admin(ready, cookies, key, active=None)
    assert chat(ready) == 401
    edit_in_admin(ready, cookies, key, active="on")
    assert chat(ready) == 200


def test_a_key_revoked_from_another_process_is_refused_by_the_very_next_request(ready: Server) -> None:
    key = ApiKey.objects.get(name="e2e")  # this test's process is "another process", as loadconfig is
    for _ in range(5):
        assert chat(ready) == 200
        key.active = False
        key.save()
        assert chat(ready) == 401
        key.active = True
        key.save()


def test_a_new_alias_routes_on_its_first_request(ready: Server) -> None:
    alias = f"fresh-{uuid.uuid4().hex[:8]}"
    assert chat(ready, alias) == 404
    load({"aliases": [{"name": alias, "provider": "up-openai_chat", "model": "mock-text"}]})
    assert chat(ready, alias) == 200
    ModelAlias.objects.filter(name=alias).delete()
    assert chat(ready, alias) == 404


def test_a_new_rate_limit_applies_from_the_next_request(ready: Server) -> None:
    assert [chat(ready) for _ in range(3)] == [200, 200, 200]
    key = ApiKey.objects.get(name="e2e")
    key.rate_limit_per_minute = 1
    key.save()
    assert [chat(ready) for _ in range(2)] == [200, 429]


def test_a_new_usd_budget_refuses_the_next_request_it_cannot_pay(ready: Server, mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, prices=PRICES))
    assert chat(ready) == 200
    # A budget refuses what was spent, as the request log shows it: wait for the answer's row.
    deadline = time.monotonic() + 10
    while not RequestLog.objects.filter(client_key__name="e2e", cost__gt=0).exists():
        assert time.monotonic() < deadline, "the answer was never logged"
        time.sleep(0.05)
    key = ApiKey.objects.get(name="e2e")
    key.usd_budget_day = "0.000001"  # less than that answer cost
    key.save()
    with pytest.raises(openai.RateLimitError, match="24-hour USD budget"):
        clients.openai_client(ready.url, CLIENT_KEY).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}])


def test_a_provider_setting_applies_to_the_next_request(ready: Server) -> None:
    assert chat(ready) == 200
    provider = Provider.objects.get(name="up-openai_chat")
    good_url = provider.base_url
    provider.base_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    provider.save()
    assert chat(ready) == 502
    provider.base_url = good_url
    provider.save()
    assert chat(ready) == 200
    provider.enabled = False
    provider.save()
    assert chat(ready) == 404


REDIS_URL = os.environ.get("REDIS_URL", "")


@pytest.fixture
def two_gateways(transactional_db: Any, mock_upstream: Server) -> Iterator[tuple[Server, Server]]:
    if connection.vendor != "postgresql" or not REDIS_URL:
        pytest.skip("needs DATABASE_URL on PostgreSQL and REDIS_URL (several gateway processes); CI sets them")
    with gateway_processes(database_url(connection.settings_dict), 2, {"REDIS_URL": REDIS_URL, **PRODUCTION_TTLS}) \
            as (a, b):
        load(pool_config(mock_upstream))
        seen(a, b)
        yield a, b


def test_a_key_revoked_through_one_process_is_refused_by_the_other_on_its_very_next_request(
        two_gateways: tuple[Server, Server]) -> None:
    a, b = two_gateways
    cookies = staff_session()
    key = ApiKey.objects.get(name="e2e")
    for through, other in ((a, b), (b, a), (a, b)):
        assert chat(through) == 200 and chat(other) == 200
        edit_in_admin(through, cookies, key, active=None)  # revoked in one process's admin
        assert chat(other) == 401  # the other's very next request
        assert chat(through) == 401
        key.active = True  # and back, through the ORM of a third process
        key.save()
        assert chat(other) == 200 and chat(through) == 200
