"""Compaction of a Responses conversation (Codex's remote compaction) on any upstream.

docs/compaction.md describes the protocol. Two requests ask for it: ``POST /v1/responses/compact``
(answered with a ``response.compaction`` object) and a ``POST /v1/responses`` whose ``input``
ends with a ``compaction_trigger`` item (answered as a normal response, stream or JSON, whose
only output item is the ``compaction`` item). Later turns send that item back in ``input``.

- A Responses upstream compacts for itself: both requests, and the items they return, are
  forwarded untouched (its ``encrypted_content`` is the upstream's own).
- A Chat or Messages upstream has no such thing, so the gateway compacts: it asks the same model,
  through the same dispatch (pool, retries, limits, request log), for a summary of the history
  under :data:`SUMMARY_PROMPT`, and returns the summary sealed (``gateway.endpoints.sealing``) as the
  item's ``encrypted_content``. On the next turns :func:`expand` opens each such item into a
  user message before the body is translated; an item this gateway cannot open is refused.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any


from translation import ir, sse
from translation.fold import Folder
from translation.ids import new_id
from translation.protocol import EncodeContext

from ..edge.responses import ApiResponse, EventStream, events_of, json_response
from ..errors import InvalidRequest, UpstreamFailed
from ..exchange.dispatch import dispatch
from ..exchange.exchange import Exchange
from .sealing import Refusal, Sealer

if TYPE_CHECKING:
    from ..app import Gateway

TRIGGER = "compaction_trigger"
ITEM = "compaction"

# Asked of the upstream model as the last user message, after the whole history; tools are
# offered (the history may call them) but not allowed.
SUMMARY_PROMPT = (
    "You are compacting this conversation so that it can continue in a fresh context. Write a "
    "handoff summary for another instance of yourself, who will see only this summary and the "
    "user's own messages. Include the user's goals and explicit instructions or constraints; what "
    "has been done so far and what came of it (files, commands, decisions and why); the current "
    "state, including anything unfinished or failing; and the next steps. Be concise and specific, "
    "keeping exact names, paths, identifiers and numbers. Do not call tools and do not continue the "
    "task: answer only with the summary."
)
# What the summary is introduced by when it stands in for its compaction item on a later turn.
SUMMARY_INTRO = "Summary of the conversation so far (it replaces the earlier turns):\n\n"

# Request fields the summary request keeps from the client's; the rest (stream, store, include,
# previous_response_id, ...) are the gateway's to choose.
_KEPT = ("model", "instructions", "tools", "parallel_tool_calls", "reasoning", "metadata", "user")


def _items(body: dict[str, Any]) -> list[Any]:
    value = body.get("input")
    if isinstance(value, str):
        return [_user_message(value)]
    return list(value) if isinstance(value, list) else []


def _user_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _as_item(message: dict[str, Any]) -> dict[str, Any]:
    """A user message in the item shape the API answers with (an easy input message has no
    ``type``, and may have its content as a string)."""

    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    return {**message, "type": "message", "content": content}


def _is(item: Any, kind: str) -> bool:
    return isinstance(item, dict) and item.get("type") == kind


def by_reference(body: dict[str, Any]) -> dict[str, Any]:
    """A compact request as the parser reads it: ``input`` is optional when ``previous_response_id`` names
    the conversation (openai-agents' compaction session sends only the id, as the SDK allows), and the
    conversation is what gets compacted. The body itself is left as the client sent it."""

    if "input" not in body and body.get("previous_response_id") is not None:
        return {**body, "input": []}
    return body


def wants_compaction(body: dict[str, Any]) -> bool:
    """A ``/v1/responses`` body asking for compaction (Codex's in-stream trigger)."""

    items = body.get("input")
    return isinstance(items, list) and bool(items) and _is(items[-1], TRIGGER)


def _refused(i: int, why: Refusal) -> InvalidRequest:
    param = f"input[{i}].encrypted_content"
    if why is Refusal.NOT_OURS:
        return InvalidRequest(
            f"input[{i}] is a compaction item this gateway did not make (or one that was altered): "
            "its content can only be read by the service that compacted the conversation, and this "
            "model is not served by it. Continue the conversation without it, or on that model", param=param)
    if why is Refusal.OTHER_KEY:
        return InvalidRequest(f"input[{i}] is a compaction item made for another API key: only the key that "
                              "compacted the conversation can continue from it", param=param)
    if why is Refusal.EXPIRED:
        return InvalidRequest(f"input[{i}] is a compaction item that has expired: compact the conversation "
                              "again, or continue it without the item", param=param)
    return InvalidRequest(f"input[{i}] is a compaction item from an earlier version of this gateway, which "
                          "can no longer be opened: compact the conversation again, or continue it without "
                          "the item", param=param)


def expand(body: dict[str, Any], sealer: Sealer, key_id: int) -> dict[str, Any] | None:
    """``body`` with each compaction item in ``input`` opened into the summary it seals, as a user
    message in its place; None when there is none. For an upstream that is not a Responses one.
    An item that does not open for ``key_id`` (the client key of the request) is a 400."""

    items = body.get("input")
    if not isinstance(items, list) or not any(_is(item, ITEM) for item in items):
        return None
    out = []
    for i, item in enumerate(items):
        if not _is(item, ITEM):
            out.append(item)
            continue
        opened = sealer.open(item.get("encrypted_content"), key_id)
        if opened.summary is None:
            raise _refused(i, opened.refusal or Refusal.NOT_OURS)
        out.append(_user_message(SUMMARY_INTRO + opened.summary))
    return {**body, "input": out}


def summary_request(body: dict[str, Any], sealer: Sealer, key_id: int) -> dict[str, Any]:
    """The Responses body that asks the model for the summary of ``body``'s conversation."""

    source = expand(body, sealer, key_id) or body
    history = [item for item in _items(source) if not _is(item, TRIGGER)]
    out = {key: source[key] for key in _KEPT if key in source}
    out.update(input=[*history, _user_message(SUMMARY_PROMPT)], stream=False, store=False)
    if out.get("tools"):
        out["tool_choice"] = "none"
    return out


async def summarise(gw: Gateway, ex: Exchange, parse: Any,
                    history: dict[str, Any]) -> tuple[dict[str, Any], ir.Usage]:
    """Ask the upstream for the summary of ``history`` (the client's body, any earlier conversation
    written out) and return the compaction item that seals it, with the usage it cost. ``ex``
    becomes that request while it runs, so its record and limits are the summary's; the summary's
    own answer is not kept as a conversation (the client never sees it).

    ``parse`` turns a Responses body into the IR, raising the client's 400 (``views.parse_request``).
    """

    original, request, keep = ex.body, ex.request, ex.keep
    ex.body = summary_request(history, gw.sealer, ex.key.id)
    ex.request, ex.keep = parse(ex.client, ex.body), False
    answer = await dispatch(gw, ex)
    ex.body, ex.request, ex.keep = original, request, keep
    assert answer.stream is None  # not streamed: the summary request has stream false
    resp = ex.client.parse_response(sse.loads(answer.body))
    summary = "\n\n".join(block.text for block in resp.blocks if block.kind == "text" and block.text).strip()
    if not summary:
        raise UpstreamFailed(502, "The upstream model answered the compaction request without a summary")
    item = {"type": ITEM, "id": new_id("cmp_"), "encrypted_content": gw.sealer.seal(summary, ex.key.id)}
    return item, resp.usage


def _usage(usage: ir.Usage) -> dict[str, Any]:
    inp, out = usage.input_tokens or 0, usage.output_tokens or 0
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
            "total_tokens": inp + out}


def compacted(body: dict[str, Any], item: dict[str, Any], usage: ir.Usage) -> dict[str, Any]:
    """The ``/v1/responses/compact`` answer: the user's own messages, then the compaction item
    (the window the client continues from, as OpenAI's endpoint returns it)."""

    kept = [_as_item(i) for i in _items(body) if isinstance(i, dict) and i.get("type", "message") == "message"
            and i.get("role") == "user"]
    return {"id": new_id("cmp_"), "object": "response.compaction", "created_at": int(time.time()),
            "output": [*kept, item], "usage": _usage(usage)}


def trigger_answer(ex: Exchange, item: dict[str, Any], usage: ir.Usage) -> ApiResponse:
    """The ``/v1/responses`` answer to a compaction trigger: one response whose only output is the
    item, written by the Responses encoder as any answer is (the item is passed through verbatim)."""

    events: list[ir.Event] = [
        ir.MessageStart(model=ex.request.model),
        ir.BlockStart(0, "server_tool", id=item["id"], name=ITEM, raw=item, raw_protocol=ex.client.NAME),
        ir.BlockStop(0), usage, ir.Finish(ir.FinishReason.STOP, raw="completed"),
    ]
    ctx = EncodeContext(model=ex.request.model, request=ex.request, body=ex.body)
    if not ex.request.stream:
        folder = Folder()
        for event in events:
            folder.feed(event)
        return json_response(ex.client.render_response(folder.result(), ctx))
    encoder = ex.client.stream_encoder(ctx)
    out = [chunk for event in events for chunk in encoder.feed(event)] + encoder.finish()
    return EventStream(events_of([b"".join(out)]))
