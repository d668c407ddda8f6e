"""Names shared by the modules of this package."""

from __future__ import annotations

from typing import Any

from .. import sse

NAME = "anthropic"
PATH = "/messages"


def parse_arguments(text: str) -> dict[str, Any]:
    """Tool arguments as Anthropic's ``input`` object; unparsable or non-object → ``{}``."""

    if not text:
        return {}
    try:
        value = sse.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
