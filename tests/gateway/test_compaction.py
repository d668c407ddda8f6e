"""Opening the gateway's compaction items before a Chat or Messages upstream, and the summary request."""

from __future__ import annotations

import pytest

from gateway.endpoints.compaction import SUMMARY_PROMPT, expand, summary_request
from gateway.endpoints.sealing import Sealer
from gateway.errors import InvalidRequest

SEALER = Sealer("unit")


def test_a_sealed_item_becomes_the_summary_as_a_user_message_in_its_place() -> None:
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": SEALER.seal("They chose teal.")}
    body = {"model": "m", "input": [{"role": "user", "content": "hi"}, item, {"role": "user", "content": "next"}]}
    out = expand(body, SEALER)
    assert out is not None
    first, middle, last = out["input"]
    assert first == body["input"][0] and last == body["input"][2]
    assert middle["role"] == "user" and middle["content"][0]["text"].endswith("They chose teal.")
    assert body["input"][1] is item  # the client's body is left as it was


def test_a_body_without_compaction_items_is_left_alone() -> None:
    assert expand({"model": "m", "input": "hello"}, SEALER) is None
    assert expand({"model": "m", "input": [{"role": "user", "content": "hi"}]}, SEALER) is None


@pytest.mark.parametrize("content", ["gAAAAABforeign", "gwc1.not-a-token", None, 42])
def test_an_item_the_gateway_cannot_open_is_a_400_naming_it(content: object) -> None:
    body = {"model": "m", "input": [{"role": "user", "content": "hi"},
                                    {"type": "compaction", "encrypted_content": content}]}
    with pytest.raises(InvalidRequest) as info:
        expand(body, SEALER)
    assert info.value.param == "input[1].encrypted_content"


def test_the_summary_request_drops_the_trigger_and_forbids_tools() -> None:
    body = {"model": "m", "stream": True, "store": True, "previous_response_id": "resp_1",
            "tools": [{"type": "function"}], "input": [{"role": "user", "content": "hi"}, {"type": "compaction_trigger"}]}
    out = summary_request(body, SEALER)
    assert out["stream"] is False and out["store"] is False and "previous_response_id" not in out
    assert out["tool_choice"] == "none" and out["tools"] == body["tools"]
    assert [i.get("type") for i in out["input"]] == [None, "message"]
    assert out["input"][-1]["content"][0]["text"] == SUMMARY_PROMPT
