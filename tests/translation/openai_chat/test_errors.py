import json

import pytest

from translation import ir
from translation.openai_chat import parse_error, render_error


def test_render_error_is_openai_envelope() -> None:
    assert render_error(400, "messages: must be a non-empty array", param="messages") == {
        "error": {"message": "messages: must be a non-empty array", "type": "invalid_request_error",
                  "param": "messages", "code": None}}


@pytest.mark.parametrize(("status", "etype"), [
    (401, "authentication_error"), (403, "permission_error"), (404, "not_found_error"),
    (429, "rate_limit_error"), (500, "server_error"), (503, "server_error"),
])
def test_render_error_type_by_status(status: int, etype: str) -> None:
    assert render_error(status, "x")["error"]["type"] == etype


def test_render_error_keeps_explicit_type() -> None:
    assert render_error(502, "x", error_type="upstream_error")["error"]["type"] == "upstream_error"


def test_parse_openai_error_body() -> None:
    body = {"error": {"message": "Unsupported parameter: 'max_tokens'", "type": "invalid_request_error",
                      "param": "max_tokens", "code": "unsupported_parameter"}}
    err = parse_error(400, body)
    assert err == ir.Error(message="Unsupported parameter: 'max_tokens'", error_type="invalid_request_error",
                           status=400, code="unsupported_parameter", param="max_tokens")


@pytest.mark.parametrize("as_type", [bytes, str])
def test_parse_error_accepts_undecoded_bodies(as_type: type) -> None:
    raw = json.dumps({"error": {"message": "Rate limited", "type": "requests", "code": "rate_limit_exceeded"}})
    body = raw.encode() if as_type is bytes else raw
    err = parse_error(429, body)
    assert (err.message, err.error_type, err.code, err.status) == ("Rate limited", "requests",
                                                                   "rate_limit_exceeded", 429)


def test_parse_openrouter_numeric_code_is_stringified() -> None:
    err = parse_error(429, {"error": {"code": 429, "message": "Provider returned error"}, "user_id": "u"})
    assert err.code == "429" and err.message == "Provider returned error"
    assert err.error_type == "rate_limit_error"  # no type given: the one for the status


def test_parse_plain_text_body() -> None:
    err = parse_error(502, b"<html>Bad Gateway</html>")
    assert err.status == 502 and err.message == "<html>Bad Gateway</html>"


def test_parse_empty_body() -> None:
    err = parse_error(503, b"")
    assert err.status == 503 and "503" in err.message


def test_parse_string_error_and_gemini_list_envelope() -> None:
    assert parse_error(400, {"error": "bad model"}).message == "bad model"
    err = parse_error(400, [{"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}}])
    assert err.message == "API key not valid" and err.status == 400


def test_parse_fastapi_detail_body() -> None:
    assert parse_error(404, {"detail": "Not Found"}).message == "Not Found"


def test_render_error_uses_the_upstream_code_and_param_when_given() -> None:
    body = render_error(400, "too long", "invalid_request_error", "messages", code="context_length_exceeded")
    assert body == {"error": {"message": "too long", "type": "invalid_request_error", "param": "messages",
                              "code": "context_length_exceeded"}}
    assert render_error(429, "slow down")["error"]["code"] == "rate_limit_exceeded"  # none given: the status's
