"""Claude Code's gateway protocol from outside, through the official anthropic SDK with its own retries on:
errors it can act on, the usage-limit headers of a capped key, its billing error at the cap, and
GET /api/oauth/usage naming the same reset second."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

import anthropic
import httpx
import openai
import pytest

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog
from accounts.outcomes import ErrorClass
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"mock-*": {"input": 1000, "output": 1000}}  # each scripted answer (7 tokens) costs $0.007
MODEL = "up-anthropic/mock-text"
H = "anthropic-ratelimit-unified-"
HI = [{"role": "user", "content": "hi"}]


def capped_key(mock: Server, **budgets: str) -> str:
    plain = f"gw-cap-{uuid.uuid4().hex}"
    config = pool_config(mock, prices=PRICES)
    config["client_keys"].append({"name": plain[-12:], "key": plain, **budgets})
    load(config)
    return plain


def sdk(gateway: Server, key: str) -> anthropic.Anthropic:
    """The SDK as Claude Code runs it: retries on (two), so a retry it should not make would show."""

    return anthropic.Anthropic(base_url=gateway.url, api_key=key, max_retries=2, timeout=30)


def refusals_logged(key: str, settle: float = 2.5) -> int:
    """The key's requests refused for a spent budget, once the log writer has had time to write them all."""

    time.sleep(settle)
    return RequestLog.objects.filter(client_key_name=key[-12:], error_class=ErrorClass.BUDGET_EXCEEDED).count()


def upstream_requests(mock: Server) -> int:
    count: int = httpx.get(mock.url + "/_mock/stats").json()["requests"]
    return count


def test_a_capped_key_sees_its_standing_then_a_billing_error_it_does_not_retry(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    key = capped_key(mock_upstream, usd_budget_day="0.0175")  # 2.5 answers
    seen(gateway)
    # The pool's accounts report their own rate limits on every answer, as Anthropic's do.
    httpx.post(mock_upstream.url + "/_mock/ratelimits", json={"requests": 1000}).raise_for_status()
    client = sdk(gateway, key)
    first = client.messages.with_raw_response.create(model=MODEL, max_tokens=20, messages=HI)
    assert first.headers[H + "status"] == "allowed" and first.headers[H + "overage-utilization"] == "0"
    assert first.headers[H + "representative-claim"] == "overage"
    assert H + "overage-surpassed-threshold" not in first.headers
    # The mock upstream sends the pool's own quota on every answer: none of it reaches the client.
    assert "anthropic-ratelimit-requests-remaining" not in first.headers
    assert H + "5h-utilization" not in first.headers
    second = client.messages.with_raw_response.create(model=MODEL, max_tokens=20, messages=HI)
    assert second.headers[H + "overage-utilization"] == "0.4"
    # /api/oauth/usage: $0.014 of $0.0175 is 80 %, in cents and whole percents.
    usage = httpx.get(gateway.url + "/api/oauth/usage", headers={"authorization": f"Bearer {key}"})
    assert usage.status_code == 200 and usage.headers["cache-control"] == "no-store"
    assert usage.json()["extra_usage"] == {"is_enabled": True, "monthly_limit": 1, "used_credits": 1,
                                           "utilization": 80, "currency": "USD"}
    [limit] = usage.json()["limits"]
    assert (limit["kind"], limit["group"], limit["percent"], limit["severity"], limit["is_active"]) == (
        "spend", "daily", 80, "warning", True)
    # A stream carries the headers too, past the first threshold, naming the same reset second.
    with client.messages.with_streaming_response.create(model=MODEL, max_tokens=20, messages=HI,
                                                        stream=True) as third:
        assert third.headers[H + "status"] == "allowed_warning"
        assert third.headers[H + "overage-utilization"] == "0.8"
        assert third.headers[H + "overage-surpassed-threshold"] == "0.75"
        reset = int(third.headers[H + "reset"])
        assert third.headers[H + "overage-reset"] == str(reset)
        assert "anthropic-ratelimit-requests-remaining" not in third.headers
        assert "".join(third.iter_text())
    assert limit["resets_at"] == dt.datetime.fromtimestamp(reset, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    # At the cap: refused before any upstream call, and the SDK does not retry into it.
    before = upstream_requests(mock_upstream)
    with pytest.raises(anthropic.RateLimitError) as refused:
        client.messages.create(model=MODEL, max_tokens=20, messages=HI)
    assert upstream_requests(mock_upstream) == before
    response = refused.value.response
    assert response.headers["x-should-retry"] == "false"
    assert response.headers[H + "status"] == "rejected"
    assert response.headers[H + "overage-disabled-reason"] == "org_spend_cap_reached"
    assert response.headers[H + "overage-period"] == "daily"
    assert response.headers[H + "overage-utilization"] == "1"
    assert H + "representative-claim" not in response.headers and H + "overage-status" not in response.headers
    body = refused.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "billing_error"
    assert body["error"]["message"].startswith("This key's 24-hour USD budget of $0.018 is used up ($0.021 in")  # dollars() shows three places
    assert refusals_logged(key) == 1  # the SDK, retries on, took x-should-retry: false
    over = httpx.get(gateway.url + "/api/oauth/usage", headers={"authorization": f"Bearer {key}"}).json()
    assert over["extra_usage"]["utilization"] == over["limits"][0]["percent"] == 120
    assert over["limits"][0]["resets_at"] == dt.datetime.fromtimestamp(
        int(response.headers[H + "reset"]), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert int(response.headers["retry-after"]) == pytest.approx(
        int(response.headers[H + "reset"]) - dt.datetime.now(dt.timezone.utc).timestamp(), abs=5)


def test_a_key_without_a_cap_gets_no_usage_headers_and_its_spend_in_cents(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    key = capped_key(mock_upstream)
    seen(gateway)
    answer = sdk(gateway, key).messages.with_raw_response.create(model=MODEL, max_tokens=20, messages=HI)
    assert not [name for name in answer.headers if name.startswith("anthropic-ratelimit")]
    spent = httpx.get(gateway.url + "/api/oauth/usage", headers={"x-api-key": key}).json()
    assert spent["limits"] == []
    extra = spent["extra_usage"]
    assert extra["monthly_limit"] is None and extra["utilization"] is None
    assert {extra["daily"]["limit"], extra["weekly"]["limit"]} == {None}
    # $0.007 is 0.7 cents: the log's figure floors to whole cents, the same for day, week and month.
    assert extra["used_credits"] == extra["daily"]["used_credits"] == extra["weekly"]["used_credits"] == 0


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions", "/api/oauth/usage"])
def test_an_unknown_or_revoked_key_is_a_401_not_to_be_retried(pool: Any, gateway: Server, path: str) -> None:
    revoked = f"gw-revoked-{uuid.uuid4().hex}"
    key = ApiKey(name=revoked[-12:], active=False)
    key.set_key(revoked)
    key.save()
    for presented in ("gw-never-issued", revoked):
        refused = httpx.request("GET" if path.startswith("/api") else "POST", gateway.url + path,
                                headers={"authorization": f"Bearer {presented}"}, json={"model": MODEL})
        assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false", refused.text
        if path != "/v1/chat/completions":
            assert refused.json()["error"]["type"] == "authentication_error"


def test_the_sdk_stops_at_once_on_a_revoked_key(pool: Any, gateway: Server) -> None:
    with pytest.raises(anthropic.AuthenticationError) as refused:
        sdk(gateway, "gw-revoked-or-never-issued").messages.create(model=MODEL, max_tokens=20, messages=HI)
    assert refused.value.response.headers["x-should-retry"] == "false"
    # The OpenAI SDK obeys the same header.
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gateway.url + "/v1", api_key="gw-nope", max_retries=2).models.list()


def test_a_context_length_error_reaches_claude_code_in_anthropics_words(pool: Any, gateway: Server) -> None:
    """Claude Code compacts on ``prompt is too long: N tokens > M maximum``: an OpenAI upstream's
    ``context_length_exceeded`` is reworded for an Anthropic client; Anthropic's own passes as it came."""

    for model in ("up-openai_chat/mock-too-long", "up-responses/mock-too-long", "up-anthropic/mock-too-long"):
        with pytest.raises(anthropic.BadRequestError) as refused:
            clients.anthropic_client(gateway.url, CLIENT_KEY).messages.create(model=model, max_tokens=20, messages=HI)
        body = refused.value.body
        assert isinstance(body, dict), model
        assert body["error"] == {"type": "invalid_request_error",
                                 "message": "prompt is too long: 210345 tokens > 200000 maximum"}, model
    # An OpenAI client keeps OpenAI's wording and code.
    with pytest.raises(openai.BadRequestError) as chat_refused:
        clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
            model="up-openai_chat/mock-too-long", messages=HI)  # type: ignore[arg-type]
    assert chat_refused.value.code == "context_length_exceeded"
