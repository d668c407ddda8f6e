"""A gateway refusal in each protocol's envelope: the status and type its own table gives it."""

from __future__ import annotations

import orjson
import pytest

from gateway.errors import GatewayError, ModelDenied, NoAccounts, PermissionDenied, SpendCapReached, render, status_of
from translation import registry


def answered(protocol: str, err: GatewayError) -> tuple[int, str, str | None]:
    body, _ = render(protocol, err)
    error = orjson.loads(body)["error"]
    return status_of(err, protocol), error["type"], error.get("code")


@pytest.mark.parametrize("protocol", ["openai_chat", "responses"])
def test_the_openai_envelopes_answer_every_refusal_as_it_is_declared(protocol: str) -> None:
    assert answered(protocol, ModelDenied("no")) == (403, "permission_error", None)
    assert answered(protocol, NoAccounts("none")) == (503, "overloaded_error", None)
    assert answered(protocol, SpendCapReached("spent")) == (429, "insufficient_quota", "insufficient_quota")


def test_anthropics_table_answers_a_denied_model_no_account_and_a_spent_budget_its_own_way() -> None:
    assert answered("anthropic", ModelDenied("no")) == (400, "invalid_request_error", None)
    assert answered("anthropic", NoAccounts("none")) == (529, "overloaded_error", None)
    assert answered("anthropic", SpendCapReached("spent")) == (429, "billing_error", None)
    assert answered("anthropic", PermissionDenied("no")) == (403, "permission_error", None)  # no kind: as declared


def test_every_kind_a_protocol_overrides_is_a_refusal_the_gateway_declares() -> None:
    kinds = {cls.kind for cls in (ModelDenied, NoAccounts, SpendCapReached)}
    for module in registry.PROTOCOLS.values():
        assert set(module.ERROR_OVERRIDES) <= kinds
