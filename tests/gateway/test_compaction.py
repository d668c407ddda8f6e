"""Opening the gateway's compaction items before a Chat or Messages upstream, and the summary request."""

from __future__ import annotations

import pytest

from gateway.endpoints.compaction import SUMMARY_PROMPT, expand, summary_request
from gateway.endpoints.sealing import Sealer
from gateway.errors import InvalidRequest

SEALER = Sealer("unit")
KEY = 7  # the client key's id


def test_a_sealed_item_becomes_the_summary_as_a_user_message_in_its_place() -> None:
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": SEALER.seal("They chose teal.", KEY)}
    body = {"model": "m", "input": [{"role": "user", "content": "hi"}, item, {"role": "user", "content": "next"}]}
    out = expand(body, SEALER, KEY)
    assert out is not None
    first, middle, last = out["input"]
    assert first == body["input"][0] and last == body["input"][2]
    assert middle["role"] == "user" and middle["content"][0]["text"].endswith("They chose teal.")
    assert body["input"][1] is item  # the client's body is left as it was


def test_a_body_without_compaction_items_is_left_alone() -> None:
    assert expand({"model": "m", "input": "hello"}, SEALER, KEY) is None
    assert expand({"model": "m", "input": [{"role": "user", "content": "hi"}]}, SEALER, KEY) is None


@pytest.mark.parametrize("content", ["gAAAAABforeign", "gwc2.not-a-token", "gwc1.an-item-of-before", None, 42])
def test_an_item_the_gateway_cannot_open_is_a_400_naming_it(content: object) -> None:
    body = {"model": "m", "input": [{"role": "user", "content": "hi"},
                                    {"type": "compaction", "encrypted_content": content}]}
    with pytest.raises(InvalidRequest) as info:
        expand(body, SEALER, KEY)
    assert info.value.param == "input[1].encrypted_content"


def test_the_summary_request_drops_the_trigger_and_forbids_tools() -> None:
    body = {"model": "m", "stream": True, "store": True, "previous_response_id": "resp_1",
            "tools": [{"type": "function"}], "input": [{"role": "user", "content": "hi"}, {"type": "compaction_trigger"}]}
    out = summary_request(body, SEALER, KEY)
    assert out["stream"] is False and out["store"] is False and "previous_response_id" not in out
    assert out["tool_choice"] == "none" and out["tools"] == body["tools"]
    assert [i.get("type") for i in out["input"]] == [None, "message"]
    assert out["input"][-1]["content"][0]["text"] == SUMMARY_PROMPT



def _with_item(sealer: Sealer) -> dict[str, object]:
    item = {"type": "compaction", "encrypted_content": sealer.seal("They chose teal.", KEY)}
    return {"model": "m", "input": [{"role": "user", "content": "hi"}, item]}


def test_an_item_made_for_another_key_is_a_400_saying_so() -> None:
    with pytest.raises(InvalidRequest) as info:
        expand(_with_item(SEALER), SEALER, KEY + 1)
    assert info.value.param == "input[1].encrypted_content" and "made for another API key" in info.value.message


def test_an_item_past_its_time_is_a_400_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    sealer = Sealer("unit", ttl=60)
    body = _with_item(sealer)
    assert expand(body, sealer, KEY) is not None  # in time
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 61)
    with pytest.raises(InvalidRequest) as info:
        expand(body, sealer, KEY)
    assert info.value.param == "input[1].encrypted_content" and "has expired" in info.value.message
