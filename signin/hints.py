"""Claude Code's gateway hint headers: read from a request, and kept per developer and client.

Sent when the managed settings set ``CLAUDE_CODE_GATEWAY_HINT_HEADERS=1``: what kind of request
this is, for which agent, the prompt it belongs to, and the checksum of the managed settings the
session runs under. The checksum is sensitive (a plain SHA-256 over settings that can hold a
short secret): it is stored in the request log and the client report, shown only as a verdict and
a short prefix, and never written to a plain log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

REQUEST_CLASS = "x-claude-code-request-class"
AGENT_TYPE = "x-claude-code-agent-type"
PROMPT_ID = "x-claude-code-prompt-id"
SETTINGS_CHECKSUM = "x-claude-code-managed-settings-checksum"

# (header, field of the request log and its width): the values are the client's, so they are cut to fit.
FIELDS = (
    (REQUEST_CLASS, "cc_request_class", 40),
    (AGENT_TYPE, "cc_agent_type", 60),
    (PROMPT_ID, "cc_prompt_id", 64),
    (SETTINGS_CHECKSUM, "cc_settings_checksum", 80),
)


class Hints(TypedDict, total=False):
    """The hints a request carries, by request-log field (``gateway.log.record.LogRecord``)."""

    cc_request_class: str
    cc_agent_type: str
    cc_prompt_id: str
    cc_settings_checksum: str


def read(headers: Mapping[str, str]) -> Hints:
    """The hint headers a request carries; none sent, an empty mapping."""

    found = Hints()
    for header, field, width in FIELDS:
        value = headers.get(header)
        if value:
            found[field] = value.strip()[:width]  # type: ignore[literal-required]  # FIELDS names Hints' keys
    return found


def shown_checksum(value: str) -> str:
    """Enough of a checksum to tell two apart on a page, not enough to test guesses against."""

    return value[:15] + "…" if len(value) > 15 else value


def add(rows: Iterable[Any]) -> None:
    """A request-log sink (``GATEWAY_LOG_SINKS``): each developer's client report takes the hints
    of their latest request in the batch (one upsert per developer and client)."""

    from .models import ClientReport

    latest: dict[tuple[int, str], Any] = {}
    for r in rows:
        user_id = getattr(r, "user_id", None)
        if user_id is not None and (r.cc_request_class or r.cc_settings_checksum or r.cc_agent_type):
            latest[(user_id, r.surface)] = r
    for (user_id, surface), r in sorted(latest.items()):
        ClientReport.objects.update_or_create(
            user_id=user_id, surface=surface,
            defaults={"settings_checksum": r.cc_settings_checksum, "request_class": r.cc_request_class,
                      "agent_type": r.cc_agent_type, "last_seen": r.created_at})
