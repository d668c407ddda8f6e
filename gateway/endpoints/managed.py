"""``GET /managed/settings``: the Claude Code managed settings for the caller's team (``signin.managed``)."""

from __future__ import annotations

from accounts.db import DatabaseUnavailable, hop
from signin.managed import answer, policy_for

from ..app import Gateway
from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, error_response, json_response
from ..errors import GatewayError, unavailable
from .auth import authenticate


async def managed_settings(gw: Gateway, request: ApiRequest) -> ApiResponse:
    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, True, gw.config)
        policy = await hop(policy_for, key.team_id)
    except GatewayError as err:
        return error_response("anthropic", err)
    except DatabaseUnavailable as exc:
        return error_response("anthropic", unavailable(exc))
    got = answer(policy, request.header("if-none-match") or None)
    if got.body is None:
        resp = ApiResponse(got.status, content_type=None)
        if got.status == 404:
            resp = json_response({"type": "error", "error": {
                "type": "not_found_error", "message": "No managed settings apply to this account"}}, 404)
    else:
        resp = json_response(got.body)
    for name, value in got.headers.items():
        resp[name] = value
    return resp
