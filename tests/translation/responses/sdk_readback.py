"""What a client of the official ``openai`` SDK makes of our Responses output.

``summary_from_stream`` serves the wire bytes to a real ``openai.OpenAI`` client
through an ``httpx.MockTransport`` and reads them with ``client.responses.stream``:
the SDK's SSE decoder, its event models (every event is also validated against its
model class) and its accumulator, which insists on ``response.created`` first, the
same response id on every lifecycle event and finished items. The summary is built
from the response object the SDK hands back: ``get_final_response()`` after
``response.completed``, the event's response after ``response.incomplete`` /
``response.failed`` (the accumulator only finalises completed responses).
``summary_from_json`` validates a non-streamed body with ``Response.model_validate``.
"""

from __future__ import annotations

import typing
import warnings
from typing import Any

import httpx
import openai
from openai._streaming import SSEDecoder
from openai.types.responses import Response, ResponseError, ResponseStreamEvent
from pydantic import BaseModel

from tests.translation.summary import Summary, parse_args
from translation import ir

_INCOMPLETE = {"max_output_tokens": ir.FinishReason.LENGTH,
               "content_filter": ir.FinishReason.CONTENT_FILTER}


def _event_models() -> dict[str, type[BaseModel]]:
    union = typing.get_args(ResponseStreamEvent)[0]  # Annotated[Union[...], discriminator]
    models: dict[str, type[BaseModel]] = {}
    for model in typing.get_args(union):
        literal = model.model_fields["type"].annotation
        for name in typing.get_args(literal):
            models[name] = model
    return models


EVENT_MODELS = _event_models()


# Items we build ourselves; anything else is a built-in tool item re-emitted verbatim from
# a Responses upstream, and the real API's own items do not all pass the SDK's strict
# models (a web_search_call source of type "api"): the SDK itself constructs them
# leniently, so for validation they are replaced by a neutral item.
OWN_ITEMS = ("message", "reasoning", "function_call")
_NEUTRAL_ITEM = {"type": "message", "id": "msg_verbatim", "status": "completed",
                 "role": "assistant", "content": []}


def _neutral(item: Any) -> Any:
    return item if isinstance(item, dict) and item.get("type") in OWN_ITEMS else _NEUTRAL_ITEM


# The SDK types ``Response.error.code`` as a closed list, but the API itself sends others in
# ``response.failed`` (the recorded openai-error.1 stream: ``insufficient_quota``); the SDK
# constructs events leniently, so for validation such a code stands in as a listed one.
_LISTED_CODES = set(typing.get_args(ResponseError.model_fields["code"].annotation))


def _for_validation(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    if "item" in data:
        data["item"] = _neutral(data["item"])
    if isinstance(data.get("response"), dict):
        response = dict(data["response"])
        response["output"] = [_neutral(i) for i in response.get("output") or []]
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") not in _LISTED_CODES:
            response["error"] = {**error, "code": "server_error"}
        data["response"] = response
    return data


def validate_wire(wire: bytes) -> list[dict[str, Any]]:
    """Every event, decoded by the SDK's SSE decoder and validated by its own model class.
    Raises on an event type the SDK does not know or a payload its model rejects."""

    events = []
    for sse in SSEDecoder().iter_bytes(iter([wire])):
        data = sse.json()
        if sse.event is not None and sse.event != data.get("type"):
            raise AssertionError(f"event: {sse.event} carries a {data.get('type')} payload")
        model = EVENT_MODELS.get(data.get("type"))
        if model is None:
            raise AssertionError(f"the SDK has no event type {data.get('type')!r}")
        model.model_validate(_for_validation(data))
        events.append(data)
    return events


def _client(wire: bytes) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=wire)

    # This SDK build annotates http_client as its vendored httpx2.Client; it only duck-types it.
    http_client: Any = httpx.Client(transport=httpx.MockTransport(handler))
    return openai.OpenAI(api_key="x", base_url="http://test/v1", max_retries=0, http_client=http_client)


def _summary(resp: Any) -> Summary:
    s = Summary()
    has_calls = False
    for item in resp.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "refusal":
                    s.refusal += part.refusal
                    continue
                s.text += part.text
                s.citations.extend((a.type, getattr(a, "url", "")) for a in part.annotations or [])
                s.logprobs.extend(t.token for t in part.logprobs or [])
        elif item.type == "reasoning":
            texts = [p.text for p in item.summary] or [p.text for p in item.content or []]
            s.reasoning += "\n\n".join(texts)
            if item.encrypted_content:
                s.signatures.append(item.encrypted_content)
        elif item.type == "function_call":
            has_calls = True
            s.tool_calls.append((item.call_id, item.name, parse_args(item.arguments)))
    if resp.status == "completed":
        s.finish = ir.FinishReason.TOOL_CALLS if has_calls else ir.FinishReason.STOP
    elif resp.status == "incomplete":
        reason = resp.incomplete_details.reason if resp.incomplete_details else None
        s.finish = _INCOMPLETE.get(reason or "", ir.FinishReason.LENGTH)
    elif resp.status == "failed":
        s.error = resp.error.message if resp.error else "failed"
    if resp.usage is not None:
        s.input_tokens, s.output_tokens = resp.usage.input_tokens, resp.usage.output_tokens
        s.cached_tokens = resp.usage.input_tokens_details.cached_tokens
        s.reasoning_tokens = resp.usage.output_tokens_details.reasoning_tokens
    return s


def _check_snapshots(snapshots: dict[tuple[str, int, int], str], resp: Any) -> None:
    """The SDK's running snapshots (text per content part, arguments per call) must end
    where the final object says they end."""

    for (kind, output_index, content_index), snapshot in snapshots.items():
        item = resp.output[output_index]
        final = item.content[content_index].text if kind == "text" else item.arguments
        if snapshot != final:
            raise AssertionError(f"streamed {kind} of output {output_index} {snapshot!r} != final {final!r}")


def summary_from_stream(wire: bytes) -> Summary:
    validate_wire(wire)
    snapshots: dict[tuple[str, int, int], str] = {}
    terminal: Any = None
    try:
        with warnings.catch_warnings(), _client(wire).responses.stream(model="test-model", input="hi") as stream:
            # The SDK re-serialises verbatim built-in items it constructed leniently and warns.
            warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
            for event in stream:
                if event.type == "response.output_text.delta":
                    snapshots[("text", event.output_index, event.content_index)] = event.snapshot
                elif event.type == "response.function_call_arguments.delta":
                    snapshots[("arguments", event.output_index, 0)] = event.snapshot
                elif event.type in ("response.incomplete", "response.failed"):
                    terminal = event.response
            final = terminal if terminal is not None else stream.get_final_response()
    except openai.APIError as exc:
        return Summary(error=exc.message)
    _check_snapshots(snapshots, final)
    return _summary(final)


def final_response(wire: bytes, validate: bool = True) -> Any:
    """The response object the SDK ends with: accumulated after ``response.completed``, the
    event's own after ``response.incomplete`` / ``response.failed``. ``validate=False`` for
    recorded upstream bytes, which older API versions wrote in shapes today's models reject."""

    if validate:
        validate_wire(wire)
    with warnings.catch_warnings(), _client(wire).responses.stream(model="test-model", input="hi") as stream:
        warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
        for event in stream:
            if event.type in ("response.incomplete", "response.failed"):
                return event.response
        return stream.get_final_response()


def summary_from_json(body: dict[str, Any]) -> Summary:
    # Verbatim built-in items are neutralised for validation; they carry no summary field.
    return _summary(Response.model_validate(_for_validation({"response": body})["response"]))
