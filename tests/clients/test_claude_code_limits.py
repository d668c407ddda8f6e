"""The real Claude Code against the gateway's refusals, with its own retries on (as users run it): at a
spent USD budget it prints the gateway's one sentence and does not retry; with a revoked key it stops
at once. Requests are counted in the gateway's request log.

The usage notice ("You've used NN% of your usage credits · resets …") is shown by Claude Code 2.1.225
and later only when signed in to a gateway (a bearer from the device flow, ``tests/clients/signin.py``).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import anthropic
import pytest
from django.utils import timezone

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog
from accounts.outcomes import ErrorClass
from tests.clients import agents, signin
from tests.clients.conftest import alias
from tests.e2e.conftest import pool_config
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"mock-*": {"input": 1000, "output": 1000}}
# Claude Code's own retry budget (its default is 10 attempts): a refusal it may retry would show.
RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "3"}


def key_with(mock: Server, **fields: Any) -> tuple[str, str]:
    plain = f"gw-cc-{uuid.uuid4().hex}"
    config = pool_config(mock, prices=PRICES)
    config["aliases"] = [{"name": alias("anthropic"), "provider": "up-anthropic", "model": "mock-shell"}]
    config["client_keys"].append({"name": plain[-12:], "key": plain, **fields})
    load(config)
    return plain, plain[-12:]


def logged(name: str, error_class: ErrorClass, settle: float = 2.5) -> int:
    time.sleep(settle)  # the request log is written a batch after the answers
    return RequestLog.objects.filter(client_key_name=name, error_class=error_class).count()


def output_of(run: agents.Run) -> str:
    texts = [e.get("result", "") for e in run.events if e.get("type") == "result"]
    return " ".join(str(t) for t in texts) + run.stderr


def test_at_a_spent_budget_claude_code_prints_the_sentence_and_does_not_retry(
        transactional_db: Any, gateway: Server, mock_upstream: Server, tmp_path: Path) -> None:
    plain, name = key_with(mock_upstream, usd_budget_day="0.01")
    seen(gateway)
    sdk = anthropic.Anthropic(base_url=gateway.url, api_key=plain, max_retries=0)
    for _ in range(2):  # $0.014 of $0.01: spent
        sdk.messages.create(model="up-anthropic/mock-text", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    started = time.monotonic()
    run = agents.claude_code(gateway.url, plain, alias("anthropic"), "Say hi.", tmp_path, **RETRIES)
    took = time.monotonic() - started
    why = run.transcript()
    assert run.returncode not in (0, None), why
    text = output_of(run)
    assert "24-hour USD budget of $0.01 is used up" in text, why
    assert re.search(r"it frees \w{3} \d{1,2} at \d\d:\d\d UTC; ask your gateway's administrators", text), why
    # Every request Claude Code sent was refused once: none was retried into the block.
    refused = logged(name, ErrorClass.BUDGET_EXCEEDED)
    assert 1 <= refused <= 2, (refused, why)  # the turn, and at most one side request of the session
    assert took < 60, why


def test_with_a_revoked_key_claude_code_stops_at_once(transactional_db: Any, gateway: Server,
                                                      mock_upstream: Server, tmp_path: Path) -> None:
    plain, name = key_with(mock_upstream)
    ApiKey.objects.filter(name=name).update(active=False)
    seen(gateway)
    time.sleep(1.5)  # rows of earlier tests are written
    since = timezone.now()
    started = time.monotonic()
    run = agents.claude_code(gateway.url, plain, alias("anthropic"), "Say hi.", tmp_path, **RETRIES)
    why = run.transcript()
    assert run.returncode not in (0, None) and time.monotonic() - started < 60, why
    # The refusals are logged under the deactivated key's name (found by its hash; never the secret).
    refused = RequestLog.objects.filter(client_key_name=name, error_class=ErrorClass.AUTHENTICATION,
                                        created_at__gte=since)
    time.sleep(2.5)
    assert 1 <= refused.count() <= 2, (refused.count(), why)


def test_past_75_percent_a_signed_in_claude_code_shows_its_usage_notice(
        transactional_db: Any, gateway: Server, mock_upstream: Server, tmp_path: Path) -> None:
    """Headless (``-p``), the notice is the CLI's ``rate_limit_event``: what the interactive session
    prints as "You've used 80% of your usage credits · resets …" from the same headers."""

    config = pool_config(mock_upstream, prices=PRICES)
    # A model name the CLI knows (an unknown one costs a side request), answered with plain text.
    config["aliases"] = [{"name": "claude-sonnet-4-5", "provider": "up-anthropic", "model": "mock-text"}]
    load(config)
    seen(gateway)
    developer = signin.sign_in(gateway, tmp_path)
    ApiKey.objects.filter(user=developer.user).update(usd_budget_day="0.0175")
    seen(gateway)
    sdk = anthropic.Anthropic(base_url=gateway.url, api_key=developer.bearer, max_retries=0)
    for _ in range(2):  # $0.014 of $0.0175: 80 %
        sdk.messages.create(model="up-anthropic/mock-text", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    started = time.time()
    run = agents.claude_code_signed_in(developer.home, developer.work, "claude-sonnet-4-5", "Say hi.")
    why = run.transcript()
    notices = [e["rate_limit_info"] for e in run.events if e.get("type") == "rate_limit_event"]
    assert notices, why
    first = notices[0]
    assert (first["status"], first["rateLimitType"], first["surpassedThreshold"]) == ("allowed_warning", "overage",
                                                                                       0.75), why
    assert first["utilization"] == 0.8, why
    # When the budget frees: the end of the half-hour slice the spending fell in, a day on.
    assert started + 86_400 - 1_800 <= first["resetsAt"] <= started + 86_400 + 1_800, why
