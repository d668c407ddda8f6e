"""The Anthropic API's refusal of beta-only fields whose beta the request does not name.

The real ``/v1/messages`` validates the body against the schema of the betas listed in
the ``anthropic-beta`` header: without ``context-management-2025-06-27`` it answers 400
``invalid_request_error`` "context_management: Extra inputs are not permitted" (the
error Claude Code users met behind proxies that dropped the header). The mock does the
same for each field that Claude Code sends with its beta (the captures in
``tests/fixtures/clients/``: 2.1.197 and 2.1.332), so a test through the mock proves
that the gateway forwarded the header. Its message starts like the real one and then
names the beta.

A system message in the middle of ``messages`` is unlocked by either of two betas: 2.1.197
names ``mid-conversation-system-2026-04-07``; 2.1.332 names
``mid-conversation-tool-changes-2026-07-01`` instead, whose system messages may also add and
remove tools (``tool_addition`` / ``tool_removal`` blocks). A tool with ``defer_loading``
(2.1.332's deferred tool loading) needs ``advanced-tool-use-2025-11-20``, or the tool search beta
``tool-search-tool-2025-10-19`` that 2.1.332 names instead when signed in to a gateway.

The other betas of those captures (``claude-code-20250219``,
``interleaved-thinking-2025-05-14``, ``thinking-token-count-2026-05-13``,
``prompt-caching-scope-2026-01-05``) unlock no field the client's body uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class BetaField:
    beta: str  # the beta the refusal names
    find: Callable[[JSON], str | None]  # the field's path in the body when present
    complaint: str  # what the real API says about the path
    also: tuple[str, ...] = ()  # other betas that unlock the field as well


def _top_level(name: str) -> Callable[[JSON], str | None]:
    return lambda body: name if name in body else None


def _effort(body: JSON) -> str | None:
    config = body.get("output_config")
    return "output_config.effort" if isinstance(config, dict) and "effort" in config else None


def _system_message(body: JSON) -> str | None:
    messages = body.get("messages")
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        if isinstance(msg, dict) and msg.get("role") == "system":
            return f"messages.{i}.role"
    return None


def _deferred_tool(body: JSON) -> str | None:
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(tool, dict) and "defer_loading" in tool:
            return f"tools.{i}.defer_loading"
    return None


EXTRA = "Extra inputs are not permitted"

BETA_FIELDS: tuple[BetaField, ...] = (
    BetaField("context-management-2025-06-27", _top_level("context_management"), EXTRA),
    BetaField("effort-2025-11-24", _effort, EXTRA),
    BetaField("mid-conversation-system-2026-04-07", _system_message,
              "Input should be 'user' or 'assistant'", also=("mid-conversation-tool-changes-2026-07-01",)),
    BetaField("advanced-tool-use-2025-11-20", _deferred_tool, EXTRA, also=("tool-search-tool-2025-10-19",)),
    # Claude Code's auto mode (its gateway protocol, "Messages") and request tags ("Billing group").
    BetaField("auto-mode-classifier-2026-07-16", _top_level("safeguards"), EXTRA),
    BetaField("request-tags-2026-08-21", _top_level("tags"), EXTRA),
)


def betas(header_values: Iterable[str]) -> set[str]:
    """The betas named by every ``anthropic-beta`` header (each a comma-separated list)."""

    return {name.strip() for value in header_values for name in value.split(",") if name.strip()}


def refusal(body: Any, header_values: Iterable[str]) -> str | None:
    """The 400 message for the first beta-only field whose beta is not named; None when all are."""

    if not isinstance(body, dict):
        return None
    named = betas(header_values)
    for field in BETA_FIELDS:
        path = field.find(body)
        if path is not None and field.beta not in named and named.isdisjoint(field.also):
            return (f"{path}: {field.complaint} (this field needs the anthropic-beta header "
                    f"to include {field.beta})")
    return None
