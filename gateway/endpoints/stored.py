"""The stored responses' endpoints: ``GET`` / ``DELETE /v1/responses/{id}``, ``GET
/v1/responses/{id}/input_items`` and ``POST /v1/responses/{id}/cancel``.

A client key reads and deletes only the responses it created; any other id is a 404 in the
OpenAI envelope, whoever's it is. The gateway runs no response in the background, so nothing can
be cancelled: a known id gets the API's 400 for a response that was not created in the background.
"""

from __future__ import annotations

from translation.responses import conversation as items

from ..app import Gateway
from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, json_response
from ..errors import InvalidRequest
from ..exchange.conversation import unknown
from ..state import KeyInfo
from .auth import authenticate

MAX_LIMIT = 100


async def _key(gw: Gateway, request: ApiRequest) -> KeyInfo:
    snap = await gw.config.get()
    key = await authenticate(request, snap, False, gw.config)
    await gw.limits.check_rate(key)
    return key


async def response(gw: Gateway, request: ApiRequest, response_id: str) -> ApiResponse:
    key = await _key(gw, request)
    if request.method == "DELETE":
        if not await gw.conversations.delete(response_id, key.id):
            raise unknown(response_id)
        return json_response({"id": response_id, "object": "response", "deleted": True})
    entry = await gw.conversations.find(response_id, key.id)
    if entry is None:
        raise unknown(response_id)
    return json_response(entry.response)


def _limit(value: str | None) -> int:
    if value is None:
        return 20
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit: must be an integer from 1 to {MAX_LIMIT}", "limit")
    return limit


async def input_items(gw: Gateway, request: ApiRequest, response_id: str) -> ApiResponse:
    key = await _key(gw, request)
    query = request.params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("order: must be 'asc' or 'desc'", "order")
    limit = _limit(query.get("limit"))
    found = await gw.conversations.find_with_input(response_id, key.id)
    if found is None:
        raise unknown(response_id)
    return json_response(items.page(found[1], limit, order, query.get("after"), query.get("before")))


async def cancel(gw: Gateway, request: ApiRequest, response_id: str) -> ApiResponse:
    key = await _key(gw, request)
    if await gw.conversations.find(response_id, key.id) is None:
        raise unknown(response_id)
    raise InvalidRequest("Only responses created with background=true can be cancelled; the gateway answers "
                         "every response in the foreground, so this one has already finished.")
