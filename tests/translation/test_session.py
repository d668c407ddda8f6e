"""What each protocol module says names a conversation: its signals, what a turn resends first, its cache's lifetime."""

from __future__ import annotations

from typing import get_args

import pytest

from translation import registry
from translation.session import DAY, HOUR, Where, first, plain


@pytest.mark.parametrize("name", sorted(registry.PROTOCOLS))
def test_every_signal_is_read_from_a_header_a_body_field_or_the_chain(name: str) -> None:
    signals = registry.get(name).SESSION_SIGNALS
    assert signals and all(where in get_args(Where) for _, where in signals)
    assert len({signal for signal, _ in signals}) == len(signals)


def test_a_cache_breakpoint_is_no_part_of_what_a_turn_resends() -> None:
    marked = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    assert plain(marked) == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert first([{"role": "system", "content": "s"}, marked], skip_roles=("system",)) == plain(marked)
    assert first("not a list", skip_roles=()) is None


def test_each_protocol_finds_its_system_part_and_first_message() -> None:
    chat = registry.get("openai_chat").conversation_start(
        {"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "q"}]})
    messages = registry.get("anthropic").conversation_start({"system": "s", "messages": [{"role": "user", "content": "q"}]})
    responses = registry.get("responses").conversation_start({"instructions": "i", "input": "q"})
    assert chat == ([{"role": "developer", "content": "d"}], {"role": "user", "content": "q"})
    assert messages == ("s", {"role": "user", "content": "q"})
    assert responses == ("i", "q")
    assert registry.get("anthropic").conversation_start({"system": "s", "messages": []}) == ("s", None)


def test_a_body_asking_for_a_longer_cache_says_how_long_in_its_own_protocols_words() -> None:
    hour = {"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}
    assert registry.get("anthropic").cache_ttl(hour) == HOUR
    assert registry.get("anthropic").cache_ttl({"prompt_cache_retention": "24h"}) is None
    for name in ("openai_chat", "responses"):
        assert registry.get(name).cache_ttl({"prompt_cache_retention": "24h"}) == DAY
        assert registry.get(name).cache_ttl(hour) is None
