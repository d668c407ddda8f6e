"""/v1/messages/count_tokens through the official Anthropic SDK: the upstream's count, else an estimate.

The scripted upstream answers count_tokens with the length of the JSON of the
messages it received, a number the gateway's estimate (about a quarter of it)
never gives: which of the two came back tells forwarded from estimated.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import orjson
import pytest

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, free_port, own_gateway, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

LIMITED_KEY = "gw-e2e-count-limited"
MESSAGES: list[Any] = [
    {"role": "user", "content": "How many tokens is this question, in a language model's eyes?"},
    {"role": "assistant", "content": "Let me count."},
    {"role": "user", "content": [{"type": "text", "text": "Please count them all " * 50}]},
]


def configure(gateway: Server, mock: Server, anthropic_keys: list[str] | None = None, anthropic_url: str | None = None) -> None:
    config = pool_config(mock, {"anthropic": anthropic_keys} if anthropic_keys is not None else None)
    if anthropic_url:
        next(p for p in config["providers"] if p["protocol"] == "anthropic")["base_url"] = anthropic_url
    config["client_keys"].append({"name": "limited", "key": LIMITED_KEY, "allowed_models": ["up-openai_chat/*"]})
    load(config)
    seen(gateway)
    httpx.post(mock.url + "/_mock/reset")


def count(gateway: Server, model: str, key: str = CLIENT_KEY) -> int:
    client = clients.anthropic_client(gateway.url, key)
    return client.messages.count_tokens(model=model, messages=MESSAGES).input_tokens


def upstream_count() -> int:
    return len(orjson.dumps(MESSAGES))


def test_an_anthropic_upstream_counts_and_its_number_comes_back(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream)
    assert count(gateway, "up-anthropic/mock-text") == upstream_count()
    [sent] = received(mock_upstream)
    assert sent["path"] == "/v1/messages/count_tokens"
    assert sent["body"]["model"] == "mock-text"  # renamed as for /v1/messages
    assert sent["body"]["messages"] == MESSAGES


def test_a_chat_upstream_gets_no_call_and_the_count_is_estimated(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream)
    estimated = count(gateway, "up-openai_chat/mock-text")
    assert received(mock_upstream) == []
    # About 270 tokens of text (200 words repeated alone make 200); the upstream would say ~1,300.
    assert 200 < estimated < upstream_count() // 2


def test_an_upstream_5xx_falls_back_to_the_estimate(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream, ["sk-fail-500-count"])
    fallback = count(gateway, "up-anthropic/mock-text")
    assert len(received(mock_upstream)) == 1  # asked, failed
    configure(gateway, mock_upstream)
    assert fallback == count(gateway, "up-openai_chat/mock-text")


def test_an_unreachable_upstream_falls_back_to_the_estimate(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream, anthropic_url=f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    fallback = count(gateway, "up-anthropic/mock-text")
    configure(gateway, mock_upstream)
    assert fallback == count(gateway, "up-openai_chat/mock-text")


def test_a_provider_without_accounts_gets_the_estimate(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream, [])
    fallback = count(gateway, "up-anthropic/mock-text")
    assert received(mock_upstream) == []
    configure(gateway, mock_upstream)
    assert fallback == count(gateway, "up-openai_chat/mock-text")


def test_an_account_that_is_rate_limited_falls_back_to_the_estimate(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream, ["sk-fail-429-count"])
    assert 200 < count(gateway, "up-anthropic/mock-text") < upstream_count() // 2


def test_an_upstream_4xx_reaches_the_client_with_its_status(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream, ["sk-fail-402-count"])
    with pytest.raises(anthropic.APIStatusError) as caught:
        count(gateway, "up-anthropic/mock-text")
    assert caught.value.status_code == 402
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert "Insufficient balance" in body["error"]["message"]


def test_the_key_may_only_count_for_models_it_may_use(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream)
    with pytest.raises(anthropic.BadRequestError, match="not allowed to use the model"):  # 400, Anthropic's table
        count(gateway, "up-anthropic/mock-text", LIMITED_KEY)
    assert received(mock_upstream) == []
    assert count(gateway, "up-openai_chat/mock-text", LIMITED_KEY) > 0


def test_an_unknown_model_is_not_found(gateway: Server, mock_upstream: Server) -> None:
    configure(gateway, mock_upstream)
    with pytest.raises(anthropic.NotFoundError):
        count(gateway, "no-such-model")



def test_providers_without_count_tokens_get_the_estimate_and_are_not_asked_again(
        django_db_blocker: Any, mock_upstream: Server) -> None:
    # A gateway of its own: which providers lack the endpoint is the process's memory.
    with own_gateway(django_db_blocker) as gateway:
        configure(gateway, mock_upstream)
        estimate = count(gateway, "up-openai_chat/mock-text")
        for status in (404, 405, 501):
            load({"providers": [{"name": f"lacks-{status}", "protocol": "anthropic", "base_url": f"{mock_upstream.url}/v1",
                                 "models": [], "accounts": [{"label": "a", "api_key": f"sk-no-count-{status}-a"}]}]})
            httpx.post(mock_upstream.url + "/_mock/reset")
            assert count(gateway, f"lacks-{status}/mock-text") == estimate  # the estimate, not the error
            assert [r["path"] for r in received(mock_upstream)] == ["/v1/messages/count_tokens"]  # asked once
            httpx.post(mock_upstream.url + "/_mock/reset")
            assert count(gateway, f"lacks-{status}/mock-text") == estimate
            assert received(mock_upstream) == []  # remembered: not asked again
            # The provider still serves messages: only the count is estimated.
            answer = clients.anthropic_client(gateway.url, CLIENT_KEY).messages.create(
                model=f"lacks-{status}/mock-text", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
            assert answer.content[0].type == "text"
        # An Anthropic-protocol provider that has the endpoint is still asked.
        assert count(gateway, "up-anthropic/mock-text") == upstream_count()
