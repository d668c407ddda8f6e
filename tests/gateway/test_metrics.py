"""The request metrics observer, on records built by hand: what a scrape then shows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from accounts.outcomes import ErrorClass, Verdict
from gateway.log.metrics import RequestMetrics
from gateway.log.record import Attempt, LogRecord
from tests.gateway.test_reqlog import logged_rows, make_account, make_key, make_provider, record, writer_without_thread

PRICES = {"gpt-5-*": {"input": 0.25, "output": 2, "cached": 0.025}}
LABELS = {"client_protocol": "openai_chat", "provider": "p", "model": "gpt-5-mini", "client_key": "k"}


def metrics() -> RequestMetrics:
    providers: dict[int, Any] = {1: SimpleNamespace(name="p", prices=PRICES, served_models=("gpt-5-mini",))}
    return RequestMetrics(lambda: providers)


def scraped(m: RequestMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(m.exposition().decode()) for s in f.samples}


def a_record(**kw: Any) -> LogRecord:
    fields: dict[str, Any] = {"request_id": "r", "client_protocol": "openai_chat", "client_key_name": "k",
                              "provider_id": 1, "model_requested": "gpt-5-mini", "model_sent": "gpt-5-mini",
                              "status": 200, "latency_ms": 1500, "ttfb_ms": 200, "input_tokens": 1000,
                              "output_tokens": 100, "cached_tokens": 200}
    return LogRecord(**{**fields, **kw})


def test_cost_is_priced_by_the_providers_table_and_only_for_answered_requests() -> None:
    m = metrics()
    m.observe(a_record())
    m.observe(a_record(status=502, error_class=ErrorClass.UPSTREAM_ERROR))
    s = scraped(m)
    # 800 × 0.25 + 200 × 0.025 + 100 × 2 per million, once: the 502 costs nothing.
    assert s[("gateway_cost_usd_total", frozenset(LABELS.items()))] == pytest.approx(0.000405)
    assert s[("gateway_requests_total", frozenset(LABELS.items()))] == 2
    assert s[("gateway_errors_total", frozenset({**LABELS, "error_class": "upstream_error"}.items()))] == 1


def test_latency_lands_in_its_bucket_and_attempts_count_by_verdict() -> None:
    m = metrics()
    m.observe(a_record(attempts=[Attempt(1, "a", 429, Verdict.RETRY, 5), Attempt(2, "b", 200, Verdict.OK, 1400)]))
    s = scraped(m)
    assert s[("gateway_request_duration_seconds_bucket", frozenset({**LABELS, "le": "1.0"}.items()))] == 0
    assert s[("gateway_request_duration_seconds_bucket", frozenset({**LABELS, "le": "2.5"}.items()))] == 1
    for verdict in ("retry", "ok"):
        assert s[("gateway_upstream_attempts_total", frozenset({**LABELS, "verdict": verdict}.items()))] == 1


@pytest.mark.django_db
def test_a_failing_observer_costs_no_request_its_log_row(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = make_provider("p")
    account, key = make_account(provider, "a"), make_key("k")

    def broken(record: LogRecord) -> None:
        raise RuntimeError("metrics broke")

    writer = writer_without_thread(monkeypatch)
    monkeypatch.setattr(writer, "observers", (broken,))
    writer.submit(record("observed_1", provider, account, key))
    writer.flush()
    assert logged_rows("observed_").count() == 1


def test_model_labels_come_from_the_configuration_never_from_what_a_client_made_up() -> None:
    from gateway.log.metrics import ModelLabels
    from gateway.state import AliasInfo

    providers: dict[int, Any] = {1: SimpleNamespace(name="p", served_models=("gpt-5-mini",)),
                                 2: SimpleNamespace(name="q", served_models=())}
    aliases = [AliasInfo("fast", False, 1, "gpt-5-mini", 0), AliasInfo("gpt-*", True, 1, "*", 0),
               AliasInfo("gpt-5-*", True, 1, "*", 0), AliasInfo("claude-*", True, 2, "*", 5)]
    label = ModelLabels(lambda: providers, lambda: aliases)
    assert [label(m) for m in ("fast", "gpt-5-mini", "gpt-5-nano", "gpt-4o", "claude-x", "p/gpt-5-mini", "p/made-up",
                               "q/anything", "nowhere/x", "made-up")] == [
        "fast", "gpt-5-mini", "gpt-5-*", "gpt-*", "claude-*", "p/gpt-5-mini", "p/*", "q/*", "(other)", "(other)"]
    assert {label(f"gpt-{i}") for i in range(5_000)} | {label(f"gpt-5-{i}") for i in range(5_000)} == {"gpt-*", "gpt-5-*"}
    assert len(label._labels) <= ModelLabels.CACHE  # what it remembers is bounded too
    aliases = [AliasInfo("gpt-9", False, 1, "gpt-9", 0)]  # a new configuration is read afresh
    assert label("gpt-9") == "gpt-9" and label("gpt-5-nano") == "(other)"


def test_many_made_up_names_open_no_new_series() -> None:
    m = metrics()
    m.observe(a_record(model_requested="p/first-made-up"))
    before = len(scraped(m))
    for i in range(2_000):
        m.observe(a_record(model_requested=f"p/made-up-{i}"))
    assert len(scraped(m)) == before
