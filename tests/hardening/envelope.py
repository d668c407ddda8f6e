"""What every answer to a hostile request must look like: the caller's own envelope, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

CHAT, MSGS, RESP, COUNT = "/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens"
ANTHROPIC_PATHS = (MSGS, COUNT)


def check_error_envelope(path: str, status: int, headers: httpx.Headers, content: bytes,
                         client_error: bool = True) -> dict[str, Any]:
    """A JSON error (a 4xx unless ``client_error`` is False) in the protocol of ``path``; returns the body."""

    assert 400 <= status < (500 if client_error else 600), f"{path}: {status} {content[:500]!r}"
    assert headers.get("content-type", "").startswith("application/json"), headers
    body = orjson.loads(content)
    error = body["error"]
    if path in ANTHROPIC_PATHS:
        assert body["type"] == "error", body
    assert isinstance(error["type"], str) and error["type"], body
    assert isinstance(error["message"], str) and error["message"], body
    assert "Traceback" not in error["message"]
    return body


def check_answer(path: str, resp: httpx.Response) -> None:
    """A 200 for a body that happened to be valid (JSON or a stream), otherwise a 4xx envelope."""

    if resp.status_code == 200:
        ctype = resp.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            assert resp.content, "an empty stream"
        else:
            assert ctype.startswith("application/json"), ctype
            assert isinstance(orjson.loads(resp.content), dict)
        return
    check_error_envelope(path, resp.status_code, resp.headers, resp.content)
