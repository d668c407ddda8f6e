"""A request's session, from what real clients send (their captured requests) and from plain bodies."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gateway.exchange.session import PREFIX, session_of
from tests.servers import ROOT
from translation.session import DAY, HOUR

CAPTURES = ROOT / "tests" / "fixtures" / "clients"


def captures(client: str) -> list[dict[str, Any]]:
    found = [json.loads(path.read_text()) for path in sorted(CAPTURES.glob(f"{client}-*.json"))]
    assert len(found) >= 2, f"captured {client} requests: {len(found)}"  # today's release and an older one
    return found


@pytest.mark.parametrize("capture", captures("claude-code"), ids=lambda c: c["version"])
def test_every_claude_code_turn_is_one_session_named_by_its_session_header(capture: dict[str, Any]) -> None:
    sessions = {session_of("anthropic", r["headers"], r["body"], key_id=7) for r in capture["requests"]}
    assert len(sessions) == 1
    (session,) = sessions
    assert session is not None and session.signal == "x-claude-code-session-id"
    raw = capture["requests"][0]["headers"]["x-claude-code-session-id"]
    assert raw.encode() not in session.digest and raw not in session.hex  # only its digest is kept


@pytest.mark.parametrize("capture", captures("codex"), ids=lambda c: c["version"])
def test_every_codex_turn_is_one_session_named_by_its_prompt_cache_key(capture: dict[str, Any]) -> None:
    sessions = {session_of("responses", r["headers"], r["body"], key_id=7) for r in capture["requests"]}
    assert len(sessions) == 1
    (session,) = sessions
    assert session is not None and session.signal == "prompt_cache_key"
    # Without the key in the body, Codex's session-id header still names the same conversation.
    bodies = [{k: v for k, v in r["body"].items() if k != "prompt_cache_key"} for r in capture["requests"]]
    by_header = {session_of("responses", r["headers"], b, key_id=7) for r, b in zip(capture["requests"], bodies)}
    assert len(by_header) == 1 and next(iter(by_header)).signal == "session-id"  # type: ignore[union-attr]


def test_claude_codes_metadata_user_id_names_the_session_without_the_header() -> None:
    body = {"model": "m", "metadata": {"user_id": "user_abc_account__session_123"},
            "messages": [{"role": "user", "content": "hi"}]}
    session = session_of("anthropic", {}, body, 1)
    assert session is not None and session.signal == "metadata.user_id"


def test_different_keys_never_share_a_session_and_the_key_alone_is_none() -> None:
    headers = {"x-claude-code-session-id": "same-id"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert session_of("anthropic", headers, body, 1) != session_of("anthropic", headers, body, 2)
    assert session_of("anthropic", headers, body, 1) == session_of("anthropic", headers, body, 1)
    # Nothing but the key: no session (one key serves many people).
    assert session_of("openai_chat", {}, {"model": "m"}, 1) is None
    assert session_of("openai_chat", {}, {"model": "m", "messages": []}, 1) is None


@pytest.mark.parametrize("client, field", [("openai_chat", "prompt_cache_key"), ("openai_chat", "user"),
                                           ("openai_chat", "safety_identifier"), ("responses", "conversation"),
                                           ("responses", "user")])
def test_chat_and_responses_fields_name_the_session(client: str, field: str) -> None:
    body: dict[str, Any] = {"model": "m", field: "abc-1"}
    session = session_of(client, {}, body, 3)
    assert session is not None and session.signal == field
    other = session_of(client, {}, {**body, field: "abc-2"}, 3)
    assert other is not None and other != session


def test_a_conversation_object_is_named_by_its_id() -> None:
    by_object = session_of("responses", {}, {"model": "m", "conversation": {"id": "conv_1"}}, 3)
    by_string = session_of("responses", {}, {"model": "m", "conversation": "conv_1"}, 3)
    assert by_object == by_string and by_object is not None


def test_a_previous_response_chain_is_named_by_its_first_response() -> None:
    body = {"model": "m", "previous_response_id": "resp_3", "input": "go on"}
    a = session_of("responses", {}, body, 3, chain_root="resp_1")
    b = session_of("responses", {}, {**body, "previous_response_id": "resp_2"}, 3, chain_root="resp_1")
    assert a == b and a is not None and a.signal == "previous_response_id"


def test_a_plain_chat_conversation_keeps_its_prefix_session_as_it_grows() -> None:
    turn1: dict[str, Any] = {"model": "gpt-x", "tools": [{"type": "function", "function": {"name": "f"}}],
                             "messages": [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": "first question"}]}
    turn2 = copy.deepcopy(turn1)
    turn2["messages"] += [{"role": "assistant", "content": "answer"}, {"role": "user", "content": "second"}]
    first, second = session_of("openai_chat", {}, turn1, 5), session_of("openai_chat", {}, turn2, 5)
    assert first is not None and first == second and first.signal == PREFIX
    other_start = copy.deepcopy(turn1)
    other_start["messages"][1]["content"] = "another conversation"
    assert session_of("openai_chat", {}, other_start, 5) != first
    assert session_of("openai_chat", {}, {**turn1, "model": "gpt-y"}, 5) != first


def test_a_moving_cache_breakpoint_does_not_change_the_prefix_session() -> None:
    """Claude Code marks the newest message for the cache: the first message loses its mark on turn 2."""

    marked = {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}
    turn1 = {"model": "m", "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
             "messages": [{"role": "user", "content": [marked]}]}
    turn2 = {"model": "m", "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
             "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]},
                          {"role": "assistant", "content": "hi"},
                          {"role": "user", "content": [{**marked, "text": "more"}]}]}
    assert session_of("anthropic", {}, turn1, 1) == session_of("anthropic", {}, turn2, 1)


def test_a_request_for_a_longer_cache_says_how_long() -> None:
    hour = {"model": "m", "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": "hi"}]}
    assert session_of("anthropic", {}, hour, 1).cache_ttl == HOUR  # type: ignore[union-attr]
    five = {**hour, "system": "s"}
    assert session_of("anthropic", {}, five, 1).cache_ttl is None  # type: ignore[union-attr]
    day = {"model": "m", "prompt_cache_key": "k", "prompt_cache_retention": "24h"}
    assert session_of("openai_chat", {}, day, 1).cache_ttl == DAY  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["x" * 1_000_000, "\u0000\ud800 odd", 12345])
def test_any_id_is_hashed_to_sixteen_bytes(value: Any) -> None:
    session = session_of("openai_chat", {}, {"model": "m", "user": value}, 1)
    assert session is not None and len(session.digest) == 16


@pytest.mark.parametrize("value", [{"nested": "object"}, ["a"], True, ""])
def test_a_value_that_is_no_id_falls_through_to_the_next_signal(value: Any) -> None:
    session = session_of("openai_chat", {}, {"model": "m", "prompt_cache_key": value, "user": "u"}, 1)
    assert session is not None and session.signal == "user"
