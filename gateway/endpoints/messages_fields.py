"""What the Messages API's own request fields ask of the gateway beyond the passthrough (the Claude
Code gateway protocol, "Messages" and "Billing group").

- ``safeguards`` (Claude Code's auto mode, with the ``auto-mode-classifier-2026-07-16`` beta) asks the
  upstream to run auto mode's safety check and answer ``safeguard_results``. An Anthropic upstream
  gets field and beta unchanged; a translated route cannot carry it, so the request is refused
  with a 400 naming ``safeguards``: Claude Code then retries without it and runs the check itself.
- ``tags`` (request tags): the one named by ``GATEWAY_BILLING_GROUP_TAG`` is the request's billing
  group, kept on its log row (Claude Code sends its ``attributionProject`` setting there). Whether
  the tags reach the upstream is the provider's ``accepts_request_tags`` (``gateway.exchange.forwarding``).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..exchange.routing import Route

SAFEGUARDS = "safeguards"


def refuse_what_the_upstream_cannot_take(body: dict[str, Any], route: Route) -> None:
    if SAFEGUARDS in body and route.provider.protocol != "anthropic":
        raise InvalidRequest("safeguards: this model's upstream cannot run auto mode's safety check; send the "
                             "request without safeguards", param=SAFEGUARDS)


def billing_group(body: dict[str, Any], tag: str) -> str:
    """The value of request tag ``tag`` ("" without one, or when ``tag`` is "")."""

    tags = body.get("tags")
    if not tag or not isinstance(tags, dict):
        return ""
    value = tags.get(tag)
    return value[:100] if isinstance(value, str) else ""
