import pytest

from translation import ir
from translation.responses.errors import (
    parse_error, render_error, response_error, stream_error,
)


def test_render_error_is_openai_envelope_with_type_by_status():
    assert render_error(400, "input[3].call_id: must be a string", param="input[3].call_id") == {
        "error": {"message": "input[3].call_id: must be a string", "type": "invalid_request_error",
                  "param": "input[3].call_id", "code": None}}
    assert render_error(429, "slow down")["error"]["type"] == "rate_limit_error"
    assert render_error(503, "down")["error"]["type"] == "server_error"
    assert render_error(401, "no", error_type="invalid_api_key")["error"]["type"] == "invalid_api_key"


def test_parse_error_keeps_provider_message_type_code_and_status():
    body = {"error": {"message": "Invalid 'temperature': decimal below minimum value.",
                      "type": "invalid_request_error", "param": "temperature",
                      "code": "decimal_below_min_value"}}
    err = parse_error(400, body)
    assert err == ir.Error(message="Invalid 'temperature': decimal below minimum value.",
                           error_type="invalid_request_error", status=400, code="decimal_below_min_value",
                           param="temperature")


@pytest.mark.parametrize("body", [
    b'{"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}',
    '{"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}',
])
def test_parse_error_accepts_bytes_and_text(body):
    err = parse_error(429, body)
    assert (err.message, err.error_type, err.code, err.status) == ("quota", "insufficient_quota",
                                                                    "insufficient_quota", 429)


@pytest.mark.parametrize("status, body, message", [
    (502, "<html>Bad gateway</html>", "<html>Bad gateway</html>"),
    (500, "", "upstream returned HTTP 500"),
    (500, None, "upstream returned HTTP 500"),
    (400, {"error": "bad input"}, "bad input"),
    (400, [{"error": {"message": "wrapped"}}], "wrapped"),
    (404, {"message": "no such model"}, "no such model"),
])
def test_parse_error_survives_any_shape(status, body, message):
    err = parse_error(status, body)
    assert err.message == message and err.status == status


@pytest.mark.parametrize("data, status", [
    ({"type": "error", "code": "rate_limit_exceeded", "message": "m", "param": None}, 429),
    ({"type": "error", "error": {"type": "insufficient_quota", "code": "insufficient_quota",
                                 "message": "m"}}, 429),
    ({"type": "error", "code": "server_error", "message": "m"}, 500),
    ({"type": "error", "code": "invalid_prompt", "message": "m"}, 400),
    ({"type": "error", "code": "invalid_request_error", "message": "m"}, 400),
    ({"type": "error", "code": "something_new", "message": "m"}, 502),
])
def test_stream_error_status_follows_code(data, status):
    err = stream_error(data)
    assert err.status == status and err.message == "m"


def test_failed_response_keeps_the_upstream_code():
    # The API itself sends codes outside the SDK's list in response.failed (the recorded
    # openai-error.1 stream: insufficient_quota), and clients act on them (Codex:
    # context_length_exceeded → "context window exceeded", insufficient_quota → quota).
    assert response_error(ir.Error("m", code="rate_limit_exceeded", status=429)) == {
        "code": "rate_limit_exceeded", "message": "m"}
    assert response_error(ir.Error("m", code="insufficient_quota", status=429))["code"] == "insufficient_quota"
    assert response_error(ir.Error("m", code="context_length_exceeded", status=400))["code"] == \
        "context_length_exceeded"


def test_failed_response_without_a_code_gets_the_one_its_status_stands_for():
    assert response_error(ir.Error("m", status=400))["code"] == "invalid_prompt"
    assert response_error(ir.Error("m", status=429))["code"] == "rate_limit_exceeded"
    assert response_error(ir.Error("m", code="529", status=529))["code"] == "server_error"  # a status, not a code
