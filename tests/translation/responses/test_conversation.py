"""A request's own input as items, a conversation written out for an upstream, and list pages."""

from __future__ import annotations

from typing import Any

from translation.responses import parse_request
from translation.responses.conversation import expanded, input_items, page, replayable

ITEMS = [{"id": f"i{n}", "type": "message"} for n in range(5)]


def ids(listing: dict[str, Any]) -> list[str]:
    return [item["id"] for item in listing["data"]]


def test_a_string_input_is_one_user_message_with_an_id() -> None:
    (item,) = input_items({"input": "hello"})
    assert item["type"] == "message" and item["role"] == "user" and item["id"].startswith("msg_")
    assert item["content"] == [{"type": "input_text", "text": "hello"}]


def test_items_keep_their_ids_and_those_without_get_one_by_type() -> None:
    got = input_items({"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"},
                                 {"role": "user", "content": "hi", "id": "mine"}]})
    assert got[0]["id"].startswith("fco_") and got[0]["call_id"] == "c1"
    assert got[1] == {"type": "message", "role": "user", "content": "hi", "id": "mine"}


def test_replayed_items_lose_their_ids_and_reasoning_without_encrypted_content() -> None:
    got = replayable([{"type": "reasoning", "id": "rs_1", "summary": []},
                      {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "e"},
                      {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}"}])
    assert got == [{"type": "reasoning", "summary": [], "encrypted_content": "e"},
                   {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]


def test_a_written_out_conversation_comes_before_the_new_input_and_parses_in_order() -> None:
    prior = [{"type": "message", "role": "user", "content": "one"},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two"}]}]
    body = expanded({"model": "m", "input": "three", "previous_response_id": "resp_1", "instructions": "now"}, prior)
    assert "previous_response_id" not in body and body["instructions"] == "now"
    req = parse_request(body)
    assert [(m.role, m.parts[0].text) for m in req.messages] == [  # type: ignore[union-attr]
        ("user", "one"), ("assistant", "two"), ("user", "three")]


def test_an_input_that_is_neither_string_nor_list_is_left_for_the_parser_to_refuse() -> None:
    assert expanded({"input": 5, "previous_response_id": "r"}, [{"type": "message"}])["input"] == 5


def test_pages_follow_the_order_and_the_cursors() -> None:
    assert ids(page(ITEMS, 2, "asc", None, None)) == ["i0", "i1"]
    assert ids(page(ITEMS, 2, "desc", None, None)) == ["i4", "i3"]
    assert ids(page(ITEMS, 10, "asc", "i1", None)) == ["i2", "i3", "i4"]
    assert ids(page(ITEMS, 10, "desc", "i3", None)) == ["i2", "i1", "i0"]
    assert ids(page(ITEMS, 10, "asc", None, "i2")) == ["i0", "i1"]
    assert ids(page(ITEMS, 10, "asc", "i0", "i3")) == ["i1", "i2"]


def test_a_page_says_whether_more_follow_and_names_its_ends() -> None:
    first = page(ITEMS, 2, "asc", None, None)
    assert first["has_more"] and first["first_id"] == "i0" and first["last_id"] == "i1"
    last = page(ITEMS, 2, "asc", "i2", None)
    assert not last["has_more"] and ids(last) == ["i3", "i4"]
    empty = page(ITEMS, 2, "asc", "nope", None)
    assert empty["data"] == [] and empty["first_id"] is None and not empty["has_more"]
