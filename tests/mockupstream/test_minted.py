"""Reasoning signed by the scripted upstream belongs to the account that minted it (``mockupstream.minted``):
the same account takes it back, another answers 400 in the provider's words. Through the official SDKs."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from mockupstream.server import ServerThread

KEY_A, KEY_B = "sk-minted-account-aaaa", "sk-minted-account-bbbb"
QUESTION = {"role": "user", "content": "Think first, then answer."}


def claude(mock: ServerThread, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=mock.url, api_key=key, max_retries=0)


def gpt(mock: ServerThread, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=mock.url + "/v1", api_key=key, max_retries=0)


def thinking_turn(mock: ServerThread, key: str) -> list[Any]:
    """A conversation whose assistant turn carries a thinking block signed for ``key``, and a follow-up."""

    answer = claude(mock, key).messages.create(model="mock-reasoning", max_tokens=2048, messages=[QUESTION],
                                               thinking={"type": "enabled", "budget_tokens": 1024})
    assert answer.content[0].type == "thinking" and answer.content[0].signature
    return [QUESTION, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
            {"role": "user", "content": "Go on."}]


def test_a_thinking_signature_is_taken_back_by_its_account_and_refused_by_another(mock_server: ServerThread) -> None:
    conversation = thinking_turn(mock_server, KEY_A)
    again = claude(mock_server, KEY_A).messages.create(model="mock-reasoning", max_tokens=2048, messages=conversation)
    assert again.stop_reason == "end_turn"
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude(mock_server, KEY_B).messages.create(model="mock-reasoning", max_tokens=2048, messages=conversation)
    assert refused.value.body["error"] == {"type": "invalid_request_error",
                                           "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}


def test_encrypted_reasoning_is_taken_back_by_its_account_and_refused_by_another(mock_server: ServerThread) -> None:
    first = gpt(mock_server, KEY_A).responses.create(model="mock-reasoning", input=[QUESTION], store=False,
                                                     include=["reasoning.encrypted_content"])
    items = [item.model_dump(exclude_none=True, warnings=False) for item in first.output]
    reasoning = next(item for item in items if item["type"] == "reasoning")
    assert reasoning["encrypted_content"]
    follow_up = [QUESTION, *items, {"role": "user", "content": "Go on."}]
    assert gpt(mock_server, KEY_A).responses.create(model="mock-reasoning", input=follow_up).status == "completed"
    with pytest.raises(openai.BadRequestError) as refused:
        gpt(mock_server, KEY_B).responses.create(model="mock-reasoning", input=follow_up)
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "invalid_encrypted_content"
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("The encrypted content ") and error["message"].endswith(" could not be verified.")
    assert reasoning["encrypted_content"] not in error["message"]  # shortened, as the API does


def test_signatures_the_scripted_upstream_did_not_mint_are_let_through(mock_server: ServerThread) -> None:
    foreign = [QUESTION, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Hmm.", "signature": "EqQBCkgIARABGAIiQL"},
        {"type": "text", "text": "Done."}]}, {"role": "user", "content": "Go on."}]
    assert claude(mock_server, KEY_B).messages.create(model="mock-text", max_tokens=64, messages=foreign).content
