"""/metrics through a real gateway: what a Prometheus scrape sees after requests made with the openai SDK."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, gateway_processes, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-scrape-token-7f3a"
PRICES = {"mock-*": {"input": 3, "output": 15}}
MSGS: list[Any] = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def metered(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_METRICS_TOKEN": TOKEN}) as server:
        yield server


def scrape(gateway: Server, token: str = TOKEN) -> str:
    answer = httpx.get(gateway.url + "/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return answer.text


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, frozenset(labels.items())), 0.0)


def test_metrics_need_the_token(metered: Server) -> None:
    assert httpx.get(metered.url + "/metrics").status_code == 401
    wrong = httpx.get(metered.url + "/metrics", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401
    assert TOKEN not in wrong.text


def test_metrics_answer_404_when_no_token_is_set(gateway: Server) -> None:
    assert httpx.get(gateway.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404


def test_requests_are_counted_with_their_labels_tokens_cost_and_attempts(metered: Server,
                                                                         mock_upstream: Server) -> None:
    # The first account fails 401 (disabled, retried), the second answers.
    served = f"mock-text-{uuid.uuid4().hex[:8]}"  # a name in the provider's list is a label of its own
    load(pool_config(mock_upstream, {"openai_chat": ["sk-fail-401-metrics", "sk-good-metrics"]}, prices=PRICES,
                     models=[served]))
    httpx.post(mock_upstream.url + "/_mock/reset")
    client = openai.OpenAI(base_url=metered.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    model = f"up-openai_chat/{served}"
    before = scrape(metered)

    plain = client.chat.completions.create(model=model, messages=MSGS)
    streamed = list(client.chat.completions.create(model=model, messages=MSGS, stream=True,
                                                   stream_options={"include_usage": True}))
    usage = [plain.usage, next(c.usage for c in streamed if c.usage)]
    assert all(u is not None for u in usage)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=f"nowhere-{uuid.uuid4().hex[:8]}", messages=MSGS)

    text = scrape(metered)
    labels = {"client_protocol": "openai_chat", "provider": "up-openai_chat", "model": model, "client_key": "e2e"}
    assert value(text, "gateway_requests_total", **labels) == 2
    assert value(text, "gateway_request_duration_seconds_count", **labels) == 2
    assert value(text, "gateway_time_to_first_byte_seconds_count", **labels) == 2
    prompt = sum(u.prompt_tokens for u in usage if u)
    completion = sum(u.completion_tokens for u in usage if u)
    assert prompt > 0 and completion > 0
    assert value(text, "gateway_tokens_total", **labels, kind="input") == prompt
    assert value(text, "gateway_tokens_total", **labels, kind="output") == completion
    expected_usd = (Decimal(prompt) * 3 + Decimal(completion) * 15) / 1_000_000
    assert value(text, "gateway_cost_usd_total", **labels) == pytest.approx(float(expected_usd))
    # One account disabled on the first request, then each request answered at once.
    assert value(text, "gateway_upstream_attempts_total", **labels, verdict="disable") == 1
    assert value(text, "gateway_upstream_attempts_total", **labels, verdict="ok") == 2
    assert value(text, "gateway_errors_total", **labels, error_class="model_not_found") == 0

    unrouted = {"client_protocol": "openai_chat", "provider": "", "model": "(unrouted)", "client_key": "e2e"}
    grew = (value(text, "gateway_errors_total", **unrouted, error_class="model_not_found")
            - value(before, "gateway_errors_total", **unrouted, error_class="model_not_found"))
    assert grew == 1
    assert "nowhere-" not in text  # a name a client made up is no label

    assert value(text, "gateway_accounts", provider="up-openai_chat", status="active") == 1
    assert value(text, "gateway_accounts", provider="up-openai_chat", status="disabled") == 1
    assert value(text, "gateway_accounts", provider="up-openai_chat", status="cooling") == 0

    for secret in (CLIENT_KEY, "sk-good-metrics", "sk-fail-401-metrics", TOKEN):
        assert secret not in text


def test_several_processes_are_summed_in_multiprocess_mode(django_db_setup: Any, django_db_blocker: Any,
                                                           mock_upstream: Server, tmp_path: Path) -> None:
    from django.db import connection

    from tests.servers import database_url

    served = f"mock-text-{uuid.uuid4().hex[:8]}"
    load(pool_config(mock_upstream, models=[served]))
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    env = {"GATEWAY_METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    model = f"up-openai_chat/{served}"
    labels = {"client_protocol": "openai_chat", "provider": "up-openai_chat", "model": model, "client_key": "e2e"}
    with gateway_processes(url, 2, env) as (first, second):
        for server in (first, second, second):
            openai.OpenAI(base_url=server.url + "/v1", api_key=CLIENT_KEY, max_retries=0).chat.completions.create(
                model=model, messages=MSGS)
        deadline = time.monotonic() + 5
        while value(scrape(first), "gateway_requests_total", **labels) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        # Either process answers for both.
        assert value(scrape(first), "gateway_requests_total", **labels) == 3
        assert value(scrape(second), "gateway_requests_total", **labels) == 3
