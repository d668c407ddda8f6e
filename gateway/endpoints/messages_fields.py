"""What the Messages API's own request fields ask of the gateway beyond the passthrough (the Claude
Code gateway protocol, "Messages" and "Billing group").

- ``safeguards`` (Claude Code's auto mode, with the ``auto-mode-classifier-2026-07-16`` beta) asks the
  upstream to run auto mode's safety check and answer ``safeguard_results``. An Anthropic upstream
  gets field and beta unchanged; a translated route cannot carry it, so the request is refused
  with a 400 naming ``safeguards``: Claude Code then retries without it and runs the check itself.
- ``tags`` (request tags): the one named by ``GATEWAY_BILLING_GROUP_TAG`` is the request's billing
  group, kept on its log row (Claude Code sends its ``attributionProject`` setting there). Whether
  the tags reach the upstream is the provider's ``accepts_request_tags`` (``gateway.exchange.forwarding``).

And what the endpoint answers beyond the common path: the caller's standing against its USD caps on a
200, in the headers Claude Code reads (``gateway.limits.standing``). The Messages view hands
:data:`MESSAGES` to ``api_call``, which asks it at each step; the other endpoints have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from translation.protocol import ProtocolModule

from ..edge.responses import ApiResponse
from ..errors import InvalidRequest
from ..exchange.routing import Route
from ..limits.standing import Standing, answer_headers

SAFEGUARDS = "safeguards"


def refuse_what_the_upstream_cannot_take(body: dict[str, Any], route: Route, client: ProtocolModule) -> None:
    if SAFEGUARDS in body and route.provider.protocol != client.NAME:
        raise InvalidRequest("safeguards: this model's upstream cannot run auto mode's safety check; send the "
                             "request without safeguards", param=SAFEGUARDS)


def billing_group(body: dict[str, Any], tag: str) -> str:
    """The value of request tag ``tag`` ("" without one, or when ``tag`` is "")."""

    tags = body.get("tags")
    if not tag or not isinstance(tags, dict):
        return ""
    value = tags.get(tag)
    return value[:100] if isinstance(value, str) else ""


class MessagesFields:
    """The Messages endpoint's own fields and answer headers, as ``api_call`` asks for them."""

    def refuse(self, body: dict[str, Any], route: Route, client: ProtocolModule) -> None:
        refuse_what_the_upstream_cannot_take(body, route, client)

    def billing_group(self, body: dict[str, Any], tag: str) -> str:
        return billing_group(body, tag)

    def answer(self, response: ApiResponse, standings: Sequence[Standing]) -> None:
        if standings and response.status == 200:
            for name, value in answer_headers(standings).items():
                response[name] = value


MESSAGES = MessagesFields()
