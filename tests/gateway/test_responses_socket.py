"""The websocket turn's pure parts: continuing the socket's last response, and the request a turn becomes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.edge.request import ApiRequest
from gateway.endpoints.views import parse_body
from gateway.endpoints.websocket import Chain, error_frame, turn_request
from gateway.errors import InvalidRequest, UpstreamFailed


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


ANSWER = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}
CHAIN = Chain("resp_last", [user("first")], [ANSWER])


def test_a_turn_naming_the_last_response_sends_its_input_and_output_before_the_new_items() -> None:
    body = CHAIN.continued({"model": "m", "previous_response_id": "resp_last", "input": [user("second")]})
    assert body == {"model": "m", "input": [user("first"), ANSWER, user("second")]}


def test_new_input_given_as_a_string_is_one_user_message_after_the_conversation() -> None:
    body = CHAIN.continued({"previous_response_id": "resp_last", "input": "second"})
    assert body["input"] == [user("first"), ANSWER, user("second")]


def test_a_turn_naming_another_response_goes_on_unchanged() -> None:
    body = {"previous_response_id": "resp_stored_upstream", "input": [user("second")]}
    assert CHAIN.continued(body) is body


def scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "websocket", "path": "/v1/responses", "root_path": "", "query_string": b"",
            "scheme": "ws", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000), "headers": list(headers)}


def test_the_turn_keeps_the_handshakes_headers_but_the_transports_beta() -> None:
    request = turn_request(scope((b"authorization", b"Bearer gw-k"),
                                 (b"openai-beta", b"responses_websockets=2026-02-06, assistants=v2")), b"{}")
    assert request.header("authorization") == "Bearer gw-k"
    assert request.header("openai-beta").strip() == "assistants=v2"
    assert request.transport == "websocket" and request.body == b"{}"


def test_the_view_takes_a_turns_body_as_the_socket_assembled_it_and_a_posts_body_from_its_bytes() -> None:
    assembled = CHAIN.continued({"model": "m", "previous_response_id": "resp_last", "input": "second"})
    request = turn_request(scope(), json.dumps(assembled).encode(), assembled)
    assert parse_body(request) is assembled  # not read again from the bytes it was written to
    posted = ApiRequest("POST", "/v1/responses", body=b'{"model": "m", "input": "hi"}')
    assert parse_body(posted) == {"model": "m", "input": "hi"}
    with pytest.raises(InvalidRequest):
        parse_body(ApiRequest("POST", "/v1/responses", body=b"[1]"))


def test_only_the_transports_beta_leaves_no_beta_header() -> None:
    request = turn_request(scope((b"openai-beta", b"responses_websockets=2026-02-06")), b"")
    assert "openai-beta" not in request.headers


def test_an_upstream_error_frame_carries_its_status_envelope_and_retry_after() -> None:
    frame = json.loads(error_frame(UpstreamFailed(429, "slow down", "rate_limit_error", headers={"Retry-After": "30"},
                                                  code="rate_limit_exceeded")))
    assert frame["type"] == "error" and frame["status"] == 429
    assert frame["error"]["message"] == "slow down" and frame["error"]["code"] == "rate_limit_exceeded"
    assert frame["headers"] == {"retry-after": "30"}
