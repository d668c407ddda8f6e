import pytest

from translation import anthropic
from translation.anthropic import errors


@pytest.mark.parametrize("status, error_type", [
    (400, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"),
    (403, "permission_error"), (404, "not_found_error"), (413, "request_too_large"),
    (429, "rate_limit_error"), (500, "api_error"), (504, "timeout_error"), (529, "overloaded_error"),
    (502, "api_error"), (503, "api_error"), (422, "invalid_request_error"),
])
def test_render_error_uses_anthropic_type_names_by_status(status: int, error_type: str) -> None:
    assert anthropic.render_error(status, "boom") == {"type": "error", "error": {"type": error_type, "message": "boom"}}


def test_render_error_keeps_an_anthropic_type_and_replaces_foreign_ones() -> None:
    assert anthropic.render_error(503, "busy", "overloaded_error")["error"]["type"] == "overloaded_error"
    assert anthropic.render_error(429, "slow down", "rate_limit_exceeded")["error"]["type"] == "rate_limit_error"


def test_render_error_has_no_param_slot_the_message_names_the_field() -> None:
    body = anthropic.render_error(400, "messages[0].role: bad", param="messages[0].role")
    assert body == {"type": "error", "error": {"type": "invalid_request_error", "message": "messages[0].role: bad"}}


def test_parse_error_reads_anthropic_envelope() -> None:
    err = anthropic.parse_error(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}})
    assert (err.status, err.error_type, err.message) == (429, "rate_limit_error", "Slow down")


def test_parse_error_reads_openai_envelope_with_code() -> None:
    err = anthropic.parse_error(402, b'{"error":{"message":"No credits","type":"insufficient_quota","code":"quota"}}')
    assert (err.status, err.error_type, err.message, err.code) == (402, "insufficient_quota", "No credits", "quota")


@pytest.mark.parametrize("body, message", [
    ("upstream exploded", "upstream exploded"),
    (b"<html>Bad gateway</html>", "<html>Bad gateway</html>"),
    ("", "upstream returned HTTP 503"),
    (None, "upstream returned HTTP 503"),
    ('{"message": "plain message"}', "plain message"),
    ('{"error": "just a string"}', "just a string"),
    ("{not json", "{not json"),
    ([1, 2], "upstream returned HTTP 503"),
])
def test_parse_error_accepts_any_shape(body: object, message: str) -> None:
    err = anthropic.parse_error(503, body)
    assert err.message == message and err.status == 503 and err.error_type == "api_error"


def test_stream_error_event_status_by_type() -> None:
    for error_type, status in [("overloaded_error", 529), ("rate_limit_error", 429), ("api_error", 500),
                               ("authentication_error", 401), ("permission_error", 403),
                               ("invalid_request_error", 400), ("not_found_error", 404),
                               ("request_too_large", 413), ("billing_error", 402), ("timeout_error", 504),
                               ("something_new", 502)]:
        err = errors.error_from_event({"type": "error", "error": {"type": error_type, "message": "m"}})
        assert (err.status, err.error_type) == (status, error_type)


def test_param_is_read_from_an_openai_shaped_body_but_never_rendered() -> None:
    err = errors.parse_error(400, {"error": {"message": "bad", "type": "invalid_request_error", "param": "max_tokens",
                                             "code": "invalid_value"}})
    assert (err.param, err.code) == ("max_tokens", "invalid_value")
    body = errors.render_error(400, "bad", "invalid_request_error", "max_tokens", code="invalid_value")
    assert body == {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
