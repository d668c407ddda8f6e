"""The passthrough's upstream body spliced into the client's own bytes (``translation.peek``): the same
JSON as serialising it whole, for any whitespace, escaping and key order, and serialised whole (None)
wherever the bytes leave a doubt."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from translation import registry
from translation.ir import UpstreamCaps
from translation.peek import splice_model, spliced

MESSAGES = [{"role": "user", "content": "Say \"model\": hi \u00e9 \U0001F600"}]


def spellings(body: dict[str, Any]) -> list[bytes]:
    """``body`` as clients write it: compact, spaced, indented, ASCII-escaped, keys in another order."""

    reordered = dict(reversed(list(body.items())))
    return [orjson.dumps(body), json.dumps(body).encode(), json.dumps(body, indent=2).encode(),
            json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
            json.dumps(reordered, separators=(", ", " : ")).encode(), b" \n\t" + orjson.dumps(reordered) + b"\r\n"]


def through(proto: str, raw: bytes, model: str, caps: UpstreamCaps | None = None) -> tuple[bytes | None, Any]:
    body = orjson.loads(raw)
    out = registry.get(proto).passthrough_request(body, model, caps or UpstreamCaps())
    return spliced(raw, body, out), out


@pytest.mark.parametrize("proto,body", [
    ("openai_chat", {"model": "my-alias", "messages": MESSAGES, "temperature": 0.5}),
    ("openai_chat", {"messages": MESSAGES, "stream": True, "model": "my-alias"}),
    ("anthropic", {"max_tokens": 10, "model": "my-alias", "messages": MESSAGES, "metadata": {"user_id": "u"}}),
    ("responses", {"model": "my-alias", "input": "hi", "store": False, "stream": True}),
])
@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5", "vendor/m\u00f6del \"q\" \\ x"])
def test_only_the_model_is_written_into_the_clients_bytes(proto: str, body: dict[str, Any], model: str) -> None:
    for raw in spellings(body):
        new, out = through(proto, raw, model)
        assert new is not None, raw
        assert orjson.loads(new) == out
        assert orjson.loads(new)["model"] == model
        # Everything but the model is the client's own bytes.
        assert raw.replace(b" ", b"").count(b"messages") == new.replace(b" ", b"").count(b"messages")


def test_a_chat_stream_gets_include_usage_at_the_head_of_the_clients_bytes() -> None:
    raw = b'{ "model" : "a",\n "stream": true, "messages": [{"role":"user","content":"hi"}] }'
    new, out = through("openai_chat", raw, "b")
    assert new is not None and new.startswith(b'{"stream_options":{"include_usage":true},')
    assert orjson.loads(new) == out
    assert new.endswith(b' "messages": [{"role":"user","content":"hi"}] }')


def test_a_model_name_spelled_with_escapes_is_read_and_replaced() -> None:
    raw = b'{"model":"gpt\\u002d4o \\"x\\" \\\\","messages":[]}'
    body = orjson.loads(raw)
    assert body["model"] == 'gpt-4o "x" \\'
    new = splice_model(raw, body, "up/\u00e9")
    assert new is not None and orjson.loads(new) == {"model": "up/\u00e9", "messages": []}


@pytest.mark.parametrize("raw", [
    b'{"mod\\u0065l":"a","messages":[]}',  # the key itself escaped
    b'{"model":"a","tools":[{"input_schema":{"properties":{"model":{"type":"string"}}}}]}',  # a nested "model"
    b'{"model":"a","model":"a"}',  # a duplicate key: the last one counts
    b'{"model":"a","text":"\\u0065"}',  # an escape that could spell the key: no certainty
    b'{"model":"a","messages":["say \\"model"]}',  # "model" inside a string
])
def test_where_the_bytes_leave_a_doubt_the_body_is_written_whole(raw: bytes) -> None:
    body = orjson.loads(raw)
    assert splice_model(raw, body, "b") is None


def test_a_field_changed_or_removed_by_the_passthrough_is_written_whole() -> None:
    raw = b'{"model":"a","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[]}'
    new, _ = through("anthropic", raw, "b", UpstreamCaps(thinking=False))
    assert new is None
    raw = b'{"model":"a","stream":true,"stream_options":{"include_obfuscation":false},"messages":[]}'
    new, _ = through("openai_chat", raw, "b")
    assert new is None


def test_the_same_model_leaves_the_bytes_as_they_came() -> None:
    raw = b'{"model" :  "a", "input": "hi"}'
    new, _ = through("responses", raw, "a")
    assert new == raw


@settings(max_examples=200, deadline=None)
@given(model=st.text(max_size=12), new=st.text(max_size=12),
       extra=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "model"),
                             st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                                          lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c,
                                                                                                max_size=3),
                                          max_leaves=6), max_size=4),
       indent=st.sampled_from([None, 1]), ascii=st.booleans(), first=st.booleans())
def test_a_splice_is_the_same_json_as_the_body_written_whole(model: str, new: str, extra: dict[str, Any],
                                                          indent: int | None, ascii: bool, first: bool) -> None:
    body = {"model": model, **extra} if first else {**extra, "model": model}
    raw = json.dumps(body, indent=indent, ensure_ascii=ascii).encode()
    out = dict(body, model=new)
    result = spliced(raw, orjson.loads(raw), out)
    if result is not None:
        assert orjson.loads(result) == out
