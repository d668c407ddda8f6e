"""Responses over a websocket (Codex's ``supports_websockets``): ``response.create`` messages in, the
events of the SSE stream out, each event's JSON as one text frame; several turns on one socket.

A turn is an ordinary request to the route's view (``gateway.endpoints.views.responses``), built as Django's
request from the handshake's headers and the message's fields: authentication, limits, the pool,
retries before the first event and the request-log row are the HTTP path's, and this module only
turns the view's answer into frames — an SSE body event by event, an error answer into an
``error`` frame carrying the HTTP status it would have had (which is how Codex reads it). The HTTP
path does no extra work for this.

Like OpenAI's websocket mode, the socket remembers its last completed response: a
``response.create`` naming it in ``previous_response_id`` sends only the new input items, and the
gateway sends the upstream the whole conversation (that response's input and output, then the new
items), so chaining works on any upstream and with ``store: false``. A ``previous_response_id``
the socket does not know goes to the view as it came. ``generate: false`` (Codex's warm-up)
answers at once with an empty completed response, whose id the next turn continues; no upstream
is called. docs/websocket.md describes the protocol.

The HTTP path's limits hold here too. A message is a request body: past ``GATEWAY_MAX_BODY_BYTES``,
or nested too deeply, it is refused as over HTTP. So is a continuation whose assembled request (the
conversation written out, then the new items) would pass the body limit: an ``error`` frame with the
413 in the body limit's words, nothing sent upstream, and the socket forgets that conversation (every
later continuation of it would only be larger). The size is known without writing the request out:
the chain keeps what its input and output weigh as JSON. A client key holds at most
``GATEWAY_MAX_SOCKETS_PER_KEY`` sockets open at once (shared with Redis, as concurrency slots are);
one more is accepted only to be told why, and closed with 4429.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from channels.generic.websocket import AsyncWebsocketConsumer

from accounts.db import DatabaseUnavailable
from translation import sse
from translation.ids import new_id
from translation.protocol import EncodeContext
from translation.responses.envelope import response_object
from translation.sse import SSEEvent, SSEParser

from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, EventStream
from ..errors import GatewayError, InvalidRequest, headers_of, render, status_of, unavailable
from .auth import authenticate
from .views import assembled_too_large, check_nesting, json_object

if TYPE_CHECKING:
    from ..app import Gateway
    from ..limits import Hold
    from ..edge.routes import Route, View

log = logging.getLogger(__name__)

PROTOCOL = "responses"
# Close codes say the HTTP status they stand for (4401 a refused key, 4503 no database): 1008 and
# 1013 would say less and Daphne lets an application close only with 1000 or 3000-4999.
CLOSE_STATUS_BASE = 4000
WEBSOCKET_BETA = "responses_websockets"  # OpenAI-Beta token of the transport, not of the request


async def serve(gw: Gateway, route: Route, scope: Any, receive: Any, send: Any) -> None:
    """The route table's websocket entry for /v1/responses: one consumer per connection."""

    await ResponsesSocket(gw, route.view)(scope, receive, send)


class _Gone(Exception):
    """The client's socket closed under a frame."""


@dataclass(frozen=True)
class Chain:
    """The socket's last completed response, which the next ``response.create`` may continue."""

    response_id: str
    input: list[Any]  # the whole input its request had
    output: list[Any]  # its output items
    size: int = 0  # bytes of input and output as JSON, give or take the brackets between them

    def continues(self, body: dict[str, Any]) -> bool:
        return body.get("previous_response_id") == self.response_id

    def continued(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self.continues(body):
            return body
        body = {k: v for k, v in body.items() if k != "previous_response_id"}
        body["input"] = [*self.input, *self.output, *input_items(body.get("input"))]
        return body


def json_size(value: Any) -> int:
    return len(orjson.dumps(value))


def input_items(value: Any) -> list[Any]:
    """A request's ``input`` as a list of items (a string is one user message)."""

    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    return list(value) if isinstance(value, list) else [value]


def error_frame(err: GatewayError) -> str:
    body, _ = render(PROTOCOL, err)
    return _error_frame(status_of(err, PROTOCOL), body, headers_of(err, PROTOCOL))


def _error_frame(status: int, body: bytes, headers: dict[str, str]) -> str:
    try:
        error = sse.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    frame: dict[str, Any] = {"type": "error", "status": status,
                             "error": error if isinstance(error, dict) else {"message": body.decode("utf-8", "replace")}}
    if headers:
        frame["headers"] = {k.lower(): v for k, v in headers.items()}
    return sse.dumps(frame)


def turn_request(scope: Mapping[str, Any], body: bytes, parsed: dict[str, Any] | None = None) -> ApiRequest:
    """The request of one turn: the handshake's headers (less the transport's beta) and ``body``
    (``parsed``: the same as the object it was written from, which the view then need not read again)."""

    headers = []
    handshake: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in handshake:
        if name.lower() == b"openai-beta":
            kept = [v for v in value.split(b",") if not v.strip().decode("latin1").startswith(WEBSOCKET_BETA)]
            if not kept:
                continue
            value = b",".join(kept)
        headers.append((name, value))
    return ApiRequest("POST", scope["path"], "", headers, body, "websocket", scope.get("client"), parsed=parsed)


class ResponsesSocket(AsyncWebsocketConsumer):
    # No channel layer: nothing is sent to these sockets from elsewhere, and with Redis each
    # connection would otherwise hold a blocking read on it.
    channel_layer_alias = "responses-sockets-use-no-layer"

    def __init__(self, gateway: Gateway, view: View) -> None:
        super().__init__()
        self.gateway = gateway
        self.view = view
        self.chain: Chain | None = None
        self.turn: asyncio.Task[None] | None = None
        self.held: Hold | None = None  # the key's socket slot, given back when the socket closes

    async def connect(self) -> None:
        try:
            snap = await self.gateway.config.get()
            key = await authenticate(turn_request(self.scope, b""), snap, False, self.gateway.config)
            cap = self.gateway.options.max_sockets_per_key
            if cap:
                self.held = await self.gateway.limits.open_socket(key, new_id("ws_"), cap)
        except (GatewayError, DatabaseUnavailable) as exc:
            err = exc if isinstance(exc, GatewayError) else unavailable(exc)
            # Accepted to say why: a refused handshake reaches most clients as a bare 403.
            await self.accept()
            await self.send(text_data=error_frame(err))
            await self.close(CLOSE_STATUS_BASE + status_of(err))
            return
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        try:
            message = self._message(raw)
        except GatewayError as err:
            await self.send(text_data=error_frame(err))
            return
        if message is None:
            return
        if self.turn is not None and not self.turn.done():
            await self.send(text_data=error_frame(InvalidRequest(
                "A response is already in progress on this socket; send the next response.create after it ends")))
            return
        self.turn = asyncio.create_task(self._turn(message, len(raw)))

    async def disconnect(self, code: int) -> None:
        held, self.held = self.held, None
        if held is not None:
            held.settle()
        turn = self.turn
        if turn is not None and not turn.done():
            turn.cancel()  # the client left: the upstream request goes too, and the row says 499
            try:
                await turn
            except asyncio.CancelledError:
                pass

    def _message(self, raw: str) -> dict[str, Any] | None:
        if len(raw) > self.gateway.options.max_body_bytes:
            raise InvalidRequest(f"The message exceeds {self.gateway.options.max_body_bytes} bytes")
        message = json_object(raw, "message")
        check_nesting(raw, message)  # as a request body is: a 400, not a failure when it is written out
        kind = message.get("type")
        if kind == "response.processed":  # Codex's acknowledgement of a finished turn: nothing to do
            return None
        if kind != "response.create":
            raise InvalidRequest(f"Unsupported message type {str(kind)[:100]!r}; send 'response.create'",
                                 param="type")
        body = {k: v for k, v in message.items() if k != "type"}
        body["stream"] = True  # a socket's answer is always the event stream
        return body

    async def _turn(self, body: dict[str, Any], size: int) -> None:
        """``size``: the message's length (its characters: bytes are checked once it is written out)."""

        try:
            if body.get("generate") is False:
                return await self._warm_up(body)
            chain = self.chain
            if chain is not None and chain.continues(body):
                limit = self.gateway.options.max_body_bytes
                if chain.size + size > limit:
                    self.chain = None  # every later continuation of it would be larger still
                    await self.send(text_data=error_frame(assembled_too_large(
                        limit, "with the conversation it continues written out", chain.size + size)))
                    return
                body = chain.continued(body)
            raw = orjson.dumps(body)
            if len(raw) > self.gateway.options.max_body_bytes:  # the estimate counted characters, not bytes
                self.chain = None
                await self.send(text_data=error_frame(assembled_too_large(
                    self.gateway.options.max_body_bytes, "as this socket assembled it", len(raw))))
                return
            # What its input weighs: the body less the rest of its fields (a few KB of tools and instructions).
            input_bytes = len(raw) - json_size({k: v for k, v in body.items() if k != "input"})
            response = await self.view(self.gateway, turn_request(self.scope, raw, body))
            await self._answer(response, body, input_bytes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("websocket turn failed")
            await self._send_quietly(error_frame(GatewayError("The gateway failed to serve this request; "
                                                              "it has been logged")))

    async def _warm_up(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        ctx = EncodeContext(model=model if isinstance(model, str) else "", body=body)
        response = response_object(ctx, new_id("resp_"), "completed", [],
                                   usage={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
        items = input_items(body.get("input"))
        self.chain = Chain(response["id"], items, [], json_size(items))
        for kind in ("response.created", "response.completed"):
            await self.send(text_data=sse.dumps({"type": kind, "response": response}))

    async def _answer(self, response: ApiResponse, body: dict[str, Any], input_bytes: int) -> None:
        if not isinstance(response, EventStream):
            content = response.body
            if response.status >= 400:
                retry_after = response.get("Retry-After")
                await self.send(text_data=_error_frame(response.status, content,
                                                       {"retry-after": retry_after} if retry_after else {}))
            else:  # a stream was asked for; should a JSON answer come all the same, it is the completed event
                await self.send(text_data=sse.dumps({"type": "response.completed", "response": sse.loads(content)}))
            return
        parser = SSEParser()
        # The view's own generator, not the wrapper __aiter__ puts around it: a cancellation thrown
        # into the wrapper would leave it suspended, to be closed as if it had ended.
        async with aclosing(response.events) as parts:
            async for part in parts:
                try:
                    for event in parser.feed(bytes(part)):
                        await self._event(event, body, input_bytes)
                except (_Gone, asyncio.CancelledError):
                    # The client left while a frame was going out, not while the stream waited on the
                    # upstream: the stream hears it as it would have there (the upstream request goes,
                    # the row says the client left), not as a plain close.
                    await parts.athrow(asyncio.CancelledError())
        for event in parser.finish():
            await self._event(event, body, input_bytes)

    async def _event(self, event: SSEEvent, body: dict[str, Any], input_bytes: int) -> None:
        data = event.data
        if not data or data == "[DONE]":
            return
        try:
            await self.send(text_data=data)
        except Exception as exc:  # noqa: BLE001 - each server says "the socket is closed" its own way
            raise _Gone from exc
        if event.event == "response.completed" or (event.event is None and '"response.completed"' in data[:80]):
            completed = sse.loads(data).get("response") or {}
            output = completed.get("output")
            if isinstance(completed.get("id"), str) and isinstance(output, list):
                self.chain = Chain(completed["id"], input_items(body.get("input")), output,
                                   input_bytes + json_size(output))

    async def _send_quietly(self, text: str) -> None:
        try:
            await self.send(text_data=text)
        except Exception:  # noqa: BLE001 - the socket is gone; there is no one left to tell
            pass
