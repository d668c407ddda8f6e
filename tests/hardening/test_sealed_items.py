"""Compaction items the gateway sealed are bound to the client key they were made for, and expire.

Key B sending key A's sealed item (copied from a shared log, a transcript, a screen) got 200, and the
upstream received A's summary. Now: a 400 naming ``input[n].encrypted_content``, nothing sent upstream.
An item past ``GATEWAY_COMPACTION_ITEM_DAYS`` is refused the same way.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "up-openai_chat/mock-text"  # a Chat upstream: the gateway compacts and seals
SECRET = "the launch code is 0000"


def two_keys(mock: Server) -> tuple[str, str]:
    a, b = f"gw-a-{uuid.uuid4().hex}", f"gw-b-{uuid.uuid4().hex}"
    config = pool_config(mock)
    config["client_keys"] += [{"name": a[-12:], "key": a}, {"name": b[-12:], "key": b}]
    load(config)
    return a, b


def post(gateway: Server, key: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(gateway.url + path, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def sealed_item(gateway: Server, key: str) -> dict[str, Any]:
    compacted = post(gateway, key, "/v1/responses/compact", {
        "model": MODEL, "input": [{"type": "message", "role": "user", "content": SECRET}]})
    assert compacted.status_code == 200, compacted.text
    item: dict[str, Any] = compacted.json()["output"][-1]
    assert item["type"] == "compaction" and SECRET not in item["encrypted_content"]
    return item


def upstream_requests(mock: Server) -> int:
    return int(httpx.get(mock.url + "/_mock/stats").json()["requests"])


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/compact"])
def test_another_keys_sealed_item_is_a_400_and_nothing_goes_upstream(pool: Any, gateway: Server,
                                                                     mock_upstream: Server, path: str) -> None:
    a, b = two_keys(mock_upstream)
    item = sealed_item(gateway, a)
    body = {"model": MODEL, "input": [item, {"type": "message", "role": "user", "content": "go on"}]}
    httpx.post(mock_upstream.url + "/_mock/reset")
    stolen = post(gateway, b, path, body)
    assert stolen.status_code == 400, stolen.text
    error = stolen.json()["error"]
    assert error["param"] == "input[0].encrypted_content" and "another API key" in error["message"]
    assert upstream_requests(mock_upstream) == 0
    # Its owner continues from it.
    assert post(gateway, a, path, body).status_code == 200
    assert upstream_requests(mock_upstream) == 1


def test_a_sealed_item_past_its_time_is_a_400(pool: Any, mock_upstream: Server, django_db_blocker: Any) -> None:
    with own_gateway(django_db_blocker, {"GATEWAY_COMPACTION_ITEM_DAYS": f"{2 / 86400:.8f}"}) as short:
        item = sealed_item(short, CLIENT_KEY)
        body = {"model": MODEL, "input": [item, {"type": "message", "role": "user", "content": "go on"}]}
        assert post(short, CLIENT_KEY, "/v1/responses", body).status_code == 200
        time.sleep(3.1)  # Fernet stamps whole seconds
        httpx.post(mock_upstream.url + "/_mock/reset")
        late = post(short, CLIENT_KEY, "/v1/responses", body)
        assert late.status_code == 400, late.text
        assert late.json()["error"]["param"] == "input[0].encrypted_content"
        assert "expired" in late.json()["error"]["message"]
        assert upstream_requests(mock_upstream) == 0
