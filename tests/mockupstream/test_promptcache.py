"""The scripted upstream's prompt cache, per account key, through the official SDKs (``mockupstream.promptcache``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from mockupstream import promptcache
from mockupstream.server import ServerThread

SYSTEM = "You are a careful assistant who answers in full sentences. " * 100  # 5,900 characters: 1,475 tokens
KEY_A, KEY_B = "sk-cache-account-aaaa", "sk-cache-account-bbbb"


@pytest.fixture()
def mock(mock_server: ServerThread) -> Iterator[ServerThread]:
    httpx.post(mock_server.url + "/_mock/reset").raise_for_status()
    yield mock_server
    httpx.post(mock_server.url + "/_mock/reset").raise_for_status()  # the TTL back to the server's own


def claude(mock: ServerThread, key: str = KEY_A) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=mock.url, api_key=key, max_retries=0)


def gpt(mock: ServerThread, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=mock.url + "/v1", api_key=key, max_retries=0)


def marked(text: str, ttl: str | None = None) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    return {"type": "text", "text": text, "cache_control": control}


def ask(client: anthropic.Anthropic, system: Any, messages: list[Any], stream: bool = False) -> Any:
    if stream:
        with client.messages.stream(model="claude-sonnet-4-6", max_tokens=64, system=system,
                                    messages=messages) as events:
            return events.get_final_message().usage
    return client.messages.create(model="claude-sonnet-4-6", max_tokens=64, system=system, messages=messages).usage


def set_ttl(mock: ServerThread, seconds: float) -> None:
    httpx.post(mock.url + "/_mock/cache", json={"ttl_seconds": seconds}).raise_for_status()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_anthropic_writes_the_marked_prefix_then_reads_it_on_the_same_account_only(mock: ServerThread,
                                                                                     stream: bool) -> None:
    system, question = [marked(SYSTEM)], [{"role": "user", "content": "Hello there, how are you?"}]
    prefix = len(SYSTEM) // 4
    first = ask(claude(mock), system, question, stream)
    assert (first.cache_read_input_tokens, first.cache_creation_input_tokens) == (0, prefix)
    assert first.cache_creation.ephemeral_5m_input_tokens == prefix and first.cache_creation.ephemeral_1h_input_tokens == 0
    again = ask(claude(mock), system, question, stream)
    assert (again.cache_read_input_tokens, again.cache_creation_input_tokens) == (prefix, 0)
    assert again.input_tokens == first.input_tokens  # the unmarked rest, every time
    # Another account of the same provider has its own cache: it writes anew.
    other = ask(claude(mock, KEY_B), system, question, stream)
    assert (other.cache_read_input_tokens, other.cache_creation_input_tokens) == (0, prefix)
    stats = httpx.get(mock.url + "/_mock/stats").json()["cache"]
    assert stats["...aaaa"]["cache_read_tokens"] == prefix and stats["...aaaa"]["cache_write_tokens"] == prefix
    assert stats["...bbbb"] == {"input_tokens": first.input_tokens + prefix, "cache_read_tokens": 0,
                                "cache_write_tokens": prefix}


def test_anthropic_entries_live_their_ttl_refreshed_on_each_hit(mock: ServerThread) -> None:
    set_ttl(mock, 1.5)
    client, system, question = claude(mock), [marked(SYSTEM)], [{"role": "user", "content": "Hello"}]
    assert ask(client, system, question).cache_creation_input_tokens > 0
    for _ in range(3):  # each hit within the TTL keeps it alive past the first write's expiry
        time.sleep(0.8)
        assert ask(client, system, question).cache_read_input_tokens > 0
    time.sleep(2.0)
    expired = ask(client, system, question)
    assert expired.cache_read_input_tokens == 0 and expired.cache_creation_input_tokens > 0


def test_anthropic_one_hour_writes_are_split_apart_and_outlive_five_minute_ones(mock: ServerThread) -> None:
    set_ttl(mock, 1.0)  # five minutes → 1 s, an hour → 12 s
    system = [marked(SYSTEM, ttl="1h")]
    tail = "Here is the task in detail. " * 60  # 1,680 characters: 420 tokens
    messages = [{"role": "user", "content": [marked(tail)]}]
    hour, rest = len(SYSTEM) // 4, (len(SYSTEM) + len(tail)) // 4 - len(SYSTEM) // 4
    client = claude(mock)
    first = ask(client, system, messages)
    assert first.cache_creation_input_tokens == hour + rest
    assert (first.cache_creation.ephemeral_1h_input_tokens, first.cache_creation.ephemeral_5m_input_tokens) == (hour, rest)
    time.sleep(1.5)  # the five-minute entry is gone, the hour-long one is not
    later = ask(client, system, messages)
    assert later.cache_read_input_tokens == hour and later.cache_creation_input_tokens == rest


def test_anthropic_reads_a_prefix_up_to_20_blocks_before_a_breakpoint(mock: ServerThread) -> None:
    first_turn = [{"role": "user", "content": [marked(SYSTEM)]}]
    written = ask(claude(mock), "Be brief.", first_turn).cache_creation_input_tokens
    assert written == (len(SYSTEM) + len("Be brief.")) // 4
    near = [{"role": "user", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": [{"type": "text", "text": f"step {i}"} for i in range(5)] + [marked("go")]}]
    assert ask(claude(mock), "Be brief.", near).cache_read_input_tokens == written
    far = [*near[:2], {"role": "user", "content": [{"type": "text", "text": f"step {i}"} for i in range(25)]
                       + [marked("go")]}]
    assert ask(claude(mock), "Be brief.", far).cache_read_input_tokens == 0  # too far back to be found


def test_anthropic_caches_nothing_shorter_than_the_minimum(mock: ServerThread) -> None:
    short = [marked("You are brief.")]
    for _ in range(2):
        usage = ask(claude(mock), short, [{"role": "user", "content": "Hi"}])
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


def test_openai_caches_prefixes_of_1024_tokens_or_more_in_128_token_steps(mock: ServerThread) -> None:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello there"}]
    first = gpt(mock).chat.completions.create(model="gpt-5-mini", messages=messages).usage
    assert first.prompt_tokens_details.cached_tokens == 0
    again = gpt(mock).chat.completions.create(model="gpt-5-mini", messages=messages).usage
    n = again.prompt_tokens
    assert again.prompt_tokens_details.cached_tokens == 1024 + (n - 1024) // 128 * 128
    # Responses reads the same account's cache in its own field; another account has none.
    answer = gpt(mock).responses.create(model="gpt-5-mini", instructions=SYSTEM, input="Another question")
    assert answer.usage.input_tokens_details.cached_tokens == 1024 + (len(SYSTEM) // 4 - 1024) // 128 * 128
    other = gpt(mock, KEY_B).chat.completions.create(model="gpt-5-mini", messages=messages).usage
    assert other.prompt_tokens_details.cached_tokens == 0
    # Below 1,024 tokens nothing is cached.
    short = [{"role": "user", "content": "Hello there"}]
    for _ in range(2):
        assert gpt(mock).chat.completions.create(model="gpt-5-mini", messages=short).usage \
            .prompt_tokens_details.cached_tokens == 0


def test_openai_cache_is_per_model(mock: ServerThread) -> None:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello"}]
    gpt(mock).chat.completions.create(model="gpt-5-mini", messages=messages)
    other_model = gpt(mock).chat.completions.create(model="gpt-5", messages=messages).usage
    assert other_model.prompt_tokens_details.cached_tokens == 0


def test_the_ttl_control_refuses_what_is_not_a_duration(mock: ServerThread) -> None:
    for bad in (0, -1, "soon", True):
        assert httpx.post(mock.url + "/_mock/cache", json={"ttl_seconds": bad}).status_code == 400
    assert httpx.post(mock.url + "/_mock/cache", json={}).json() == {"ttl_seconds": promptcache.FIVE_MINUTES}


def test_the_cache_drops_the_oldest_entries_past_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promptcache, "MAX_ENTRIES", 3)
    cache = promptcache.PromptCache(clock=lambda: 0.0)
    for i in range(5):
        cache._store("k", bytes([i]), 10.0, 0.0)
    assert [cache._alive("k", bytes([i]), 0.0) for i in range(5)] == [False, False, True, True, True]
