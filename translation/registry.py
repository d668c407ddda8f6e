"""Protocol name → protocol module. The only place that lists them."""

from __future__ import annotations

from . import anthropic, openai_chat, responses
from .protocol import ProtocolModule

PROTOCOLS: dict[str, ProtocolModule] = {
    openai_chat.NAME: openai_chat,
    anthropic.NAME: anthropic,
    responses.NAME: responses,
}


def get(name: str) -> ProtocolModule:
    return PROTOCOLS[name]
