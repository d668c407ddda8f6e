"""Session digests are compared across processes and kept in the affinity store: the same body gives
the same bytes from one release to the next. The digests below were computed before the per-protocol
rules moved into the protocol modules; a change here re-homes every live conversation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.exchange.session import session_of
from tests.servers import ROOT

HOUR_MARK = {"type": "ephemeral", "ttl": "1h"}
Case = tuple[str, dict[str, str], dict[str, Any], int | None, str | None, tuple[str, str, float | None] | None]

CASES: list[Case] = [
    ("anthropic", {"x-claude-code-session-id": "cc-sess-1"},
     {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}, 7, None,
     ("596dd0b7a0b74a9e216406943fe38060", "x-claude-code-session-id", None)),
    ("anthropic", {}, {"model": "claude-x", "metadata": {"user_id": "user_abc__session_9"}, "messages": []}, 7, None,
     ("6d5f2ca769b1e0cdd1e924613aa07409", "metadata.user_id", None)),
    ("anthropic", {},
     {"model": "claude-x", "system": [{"type": "text", "text": "sys", "cache_control": HOUR_MARK}],
      "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "cache_control": HOUR_MARK}],
      "messages": [{"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]},
                   {"role": "assistant", "content": "hi"}]}, 3, None,
     ("e73b4cb0d0a7b9e8fd9317e8e749d15e", "prefix", 3600.0)),
    ("anthropic", {}, {"model": "claude-x", "system": "plain system", "messages": [{"role": "user", "content": "q"}]},
     None, None, ("4adf2857eb092cdc15947987062c7aea", "prefix", None)),
    ("responses", {"session-id": "codex-s"}, {"model": "gpt-5", "prompt_cache_key": "thread-1", "input": "x"}, 7, None,
     ("022fe19554ecc34fe0480fd5670d3fe0", "prompt_cache_key", None)),
    ("responses", {"session-id": "codex-s", "thread-id": "t"}, {"model": "gpt-5", "input": "x"}, 7, None,
     ("aae6f3845a8943f23f9bb9d2580b6e61", "session-id", None)),
    ("responses", {}, {"model": "gpt-5", "conversation": {"id": "conv_1"}}, 7, None,
     ("096b20d5a1a1692c10ba673d2738f224", "conversation", None)),
    ("responses", {}, {"model": "gpt-5", "previous_response_id": "resp_3", "input": "go"}, 7, "resp_1",
     ("c7a15fcecce101a2a09d583059e1836e", "previous_response_id", None)),
    ("responses", {}, {"model": "gpt-5", "safety_identifier": "sid", "prompt_cache_retention": "24h"}, 7, None,
     ("4994993179cdb3ec85ba92fe3d331b72", "safety_identifier", 86400.0)),
    ("responses", {}, {"model": "gpt-5", "instructions": "be terse", "input": "a string input"}, 7, None,
     ("3a8a9665e4ab0b690ec04c1297b94fd2", "prefix", None)),
    ("responses", {},
     {"model": "gpt-5", "instructions": "be terse", "tools": [{"type": "function", "name": "shell"}, {"type": "web_search"}],
      "input": [{"role": "developer", "content": "dev"},
                {"role": "system", "content": [{"type": "input_text", "text": "s"}]},
                {"role": "user", "content": [{"type": "input_text", "text": "first"}]},
                {"role": "assistant", "content": "a"}], "prompt_cache_retention": "24h"}, 2, None,
     ("675c0127d6c794d757aa6fe4a52f02fa", "prefix", 86400.0)),
    ("openai_chat", {}, {"model": "gpt-x", "user": 12345}, 1, None, ("f7d002454ea90724bec75d19b36621d7", "user", None)),
    ("openai_chat", {}, {"model": "gpt-x", "prompt_cache_key": {"no": 1}, "user": " spaced "}, 1, None,
     ("be7f7d46842f5c8f4a38364e7961e971", "user", None)),
    ("openai_chat", {},
     {"model": "gpt-x", "tools": [{"type": "function", "function": {"name": "f"}}],
      "messages": [{"role": "system", "content": "be brief"},
                   {"role": "developer", "content": [{"type": "text", "text": "d", "cache_control": {"type": "ephemeral"}}]},
                   {"role": "user", "content": "first question"}]}, 5, None,
     ("acc0751313ff41b4e9829c1d1dc7c85d", "prefix", None)),
    ("openai_chat", {}, {"model": "gpt-x", "messages": [{"role": "user", "content": "\u00e9\ud800"}]}, 5, None, None),
    ("openai_chat", {}, {"model": "gpt-x", "messages": [{"role": "system", "content": "only system"}]}, 5, None, None),
]


@pytest.mark.parametrize("client, headers, body, key_id, root, expected", CASES)
def test_a_body_names_the_same_session_digest_as_before(client: str, headers: dict[str, str], body: dict[str, Any],
                                                        key_id: int | None, root: str | None,
                                                        expected: tuple[str, str, float | None] | None) -> None:
    session = session_of(client, headers, body, key_id, root)
    assert (None if session is None else (session.hex, session.signal, session.cache_ttl)) == expected


# The last captured request of each real client: named by its own signal, and by its prefix without one.
CAPTURED = [
    ("claude-code-2.1.197", "anthropic", "2cc59060e4132c7bf30ed5be7e33a78a", "de65e93b95ddb3a297b89536a3e141e5"),
    ("claude-code-2.1.332", "anthropic", "96b73bbf6894ab8557b36f8c9350cb25", "f344138c67995f7951246d2ebf5ad4dd"),
    ("codex-0.169.0", "responses", "6cb6156919d869d85eac3412357a45e7", "457598174250f46e0020f56998563787"),
    ("codex-0.171.0", "responses", "d75bc17c3eb6c056644f9830841b4672", "987a26d268d1803a22a188c00ef7ee64"),
]


@pytest.mark.parametrize("capture, client, by_signal, by_prefix", CAPTURED)
def test_a_captured_client_request_names_the_same_session_digests_as_before(capture: str, client: str,
                                                                           by_signal: str, by_prefix: str) -> None:
    request = json.loads((ROOT / "tests" / "fixtures" / "clients" / f"{capture}.json").read_text())["requests"][-1]
    named = session_of(client, request["headers"], request["body"], 7)
    unnamed = {k: v for k, v in request["body"].items() if k not in ("prompt_cache_key", "metadata")}
    prefixed = session_of(client, {}, unnamed, 7)
    assert named is not None and named.hex == by_signal
    assert prefixed is not None and (prefixed.hex, prefixed.signal) == (by_prefix, "prefix")
