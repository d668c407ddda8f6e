"""What an official ``openai`` SDK client makes of Chat Completions output.

Built ONLY from the SDK's own machinery: a real ``openai.OpenAI`` client over a
mock transport (its SSE decoder, its in-stream error detection that raises
``APIError``, its ``ChatCompletionStream`` accumulator) for streams, and
``ChatCompletion.model_validate`` for JSON bodies.

Chat cannot carry reasoning signatures, so ``Summary.signatures`` is always empty,
and it has no "pause" finish reason (an IR PAUSE reads back as STOP).
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from tests.translation.summary import Summary, parse_args
from translation import ir

# The SDK's finish_reason literals, read back into IR terms (kept here, independent of
# the package under test).
_FINISH = {
    "stop": ir.FinishReason.STOP,
    "length": ir.FinishReason.LENGTH,
    "tool_calls": ir.FinishReason.TOOL_CALLS,
    "function_call": ir.FinishReason.TOOL_CALLS,
    "content_filter": ir.FinishReason.CONTENT_FILTER,
}


def _client(wire: bytes) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=wire)

    return openai.OpenAI(api_key="x", base_url="http://test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def summary_from_stream(wire: bytes) -> Summary:
    """Stream ``wire`` through ``client.chat.completions.stream()`` and summarise the
    accumulated completion. An error chunk makes the SDK raise ``APIError``: its message
    goes to ``Summary.error``, with whatever the accumulator had gathered before it."""

    client = _client(wire)
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "x"}]) as stream:
        try:
            for _ in stream:
                pass
        except openai.APIError as exc:
            summary = _summary_or_empty(stream)
            summary.error = exc.message
            return summary
        try:
            completion: Any = stream.get_final_completion()
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            # the SDK refuses to *parse* such completions but still hands over the accumulated one
            completion = exc.completion
    return _summary(completion)


def final_completion(wire: bytes) -> Any:
    """The completion ``ChatCompletionStream`` accumulates from ``wire`` (raises on an error chunk)."""

    with _client(wire).chat.completions.stream(model="m", messages=[{"role": "user", "content": "x"}]) as stream:
        return stream.get_final_completion()


def summary_from_json(body: dict[str, Any]) -> Summary:
    return _summary(ChatCompletion.model_validate(body))


def _summary_or_empty(stream: Any) -> Summary:
    try:
        snapshot = stream.current_completion_snapshot
    except AssertionError:  # no chunk was accumulated before the error
        return Summary()
    summary = _summary(snapshot)
    summary.finish = None
    return summary


def _summary(completion: Any) -> Summary:
    s = Summary()
    if completion.choices:
        choice = completion.choices[0]
        message = choice.message
        s.text = message.content or ""
        s.refusal = message.refusal or ""
        s.citations = [("url_citation", a.url_citation.url) for a in message.annotations or []]
        if choice.logprobs is not None:
            s.logprobs = [t.token for t in choice.logprobs.content or []]
        extra = message.model_extra or {}
        s.reasoning = extra.get("reasoning_content") or ""
        for call in message.tool_calls or []:
            s.tool_calls.append((call.id, call.function.name, parse_args(call.function.arguments)))
        s.finish = _FINISH.get(choice.finish_reason) if choice.finish_reason else None
    usage = completion.usage
    if usage is not None:
        s.input_tokens, s.output_tokens = usage.prompt_tokens, usage.completion_tokens
        if usage.prompt_tokens_details is not None:
            s.cached_tokens = usage.prompt_tokens_details.cached_tokens
        if usage.completion_tokens_details is not None:
            s.reasoning_tokens = usage.completion_tokens_details.reasoning_tokens
    return s
