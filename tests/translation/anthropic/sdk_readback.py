"""What an Anthropic client ends up with, read ONLY through the official ``anthropic`` SDK.

Streaming: a real ``anthropic.Anthropic`` client over an in-memory transport,
``client.messages.stream(...)`` and ``get_final_message()`` — the SDK's own SSE
decoder (which dispatches on the ``event:`` name) and accumulator. Non-streaming:
``anthropic.types.Message.model_validate``. Usage is converted back to the IR
convention (input = input_tokens + cache reads + cache creation).
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2  # the SDK's HTTP library (it refuses plain httpx clients)
import pydantic
from anthropic.types import Message
from anthropic.types.beta import BetaMessage

from tests.translation.summary import Summary, parse_args
from translation import ir

# Independent of translation.anthropic.stop_reason on purpose: this is the client's reading.
_FINISH = {
    "end_turn": ir.FinishReason.STOP,
    "stop_sequence": ir.FinishReason.STOP,
    "max_tokens": ir.FinishReason.LENGTH,
    "model_context_window_exceeded": ir.FinishReason.LENGTH,
    "tool_use": ir.FinishReason.TOOL_CALLS,
    "refusal": ir.FinishReason.REFUSAL,
    "pause_turn": ir.FinishReason.PAUSE,
}


def _client(wire: bytes) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=wire)

    return anthropic.Anthropic(api_key="x", base_url="http://test", max_retries=0,
                               http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def summary_from_stream(wire: bytes) -> Summary:
    client = _client(wire)
    error: str | None = None
    message: Any = None
    with client.messages.stream(model="m", max_tokens=1024, messages=[{"role": "user", "content": "hi"}]) as stream:
        try:
            message = stream.get_final_message()
        except anthropic.APIError as exc:
            error = _error_message(exc)
            message = stream.current_message_snapshot if _has_snapshot(stream) else None
    summary = _summary(message) if message is not None else Summary()
    summary.error = error
    if error is not None:
        summary.finish = None  # the client saw a failure, not a finished message
    return summary


def final_message(wire: bytes) -> Any:
    """The message ``client.messages.stream`` accumulates from ``wire``."""

    with _client(wire).messages.stream(model="m", max_tokens=1024, messages=[{"role": "user", "content": "hi"}]) as s:
        return s.get_final_message()


def summary_from_json(body: dict[str, Any]) -> Summary:
    try:
        message: Any = Message.model_validate(body)
    except pydantic.ValidationError:
        # Beta-only blocks (compaction, …) validate only as the beta client's model.
        message = BetaMessage.model_validate(body)
    return _summary(message)


def _has_snapshot(stream: Any) -> bool:
    try:
        stream.current_message_snapshot  # noqa: B018 - raises before message_start
    except Exception:
        return False
    return True


def _error_message(exc: anthropic.APIError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str):
            return message
    return exc.message


def _summary(message: Any) -> Summary:
    s = Summary()
    for block in message.content:
        match block.type:
            case "text":
                s.text += block.text
                for c in block.citations or []:
                    # The IR's name for a web page citation, kept independent of the package.
                    s.citations.append(("url_citation", c.url) if c.type == "web_search_result_location"
                                       else (c.type, ""))
            case "thinking":
                s.reasoning += block.thinking
                if block.signature:
                    s.signatures.append(block.signature)
            case "tool_use":
                s.tool_calls.append((block.id, block.name, _args(block.input)))
    s.finish = _FINISH.get(message.stop_reason) if message.stop_reason else None
    details = getattr(message, "stop_details", None)
    s.refusal = (getattr(details, "explanation", None) or "") if details is not None else ""
    u = message.usage
    cached = u.cache_read_input_tokens
    creation = u.cache_creation_input_tokens
    s.input_tokens = u.input_tokens + (cached or 0) + (creation or 0)
    s.output_tokens = u.output_tokens
    s.cached_tokens = cached
    details = u.output_tokens_details
    s.reasoning_tokens = details.thinking_tokens if details is not None else None
    return s


def _args(value: Any) -> Any:
    # The SDK parses tool input for us; a raw string (never expected) goes through the shared parser.
    return parse_args(value) if isinstance(value, str) else value
