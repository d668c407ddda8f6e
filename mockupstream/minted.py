"""Reasoning the scripted upstream signs belongs to the account that minted it, as the providers' does.

A provider verifies the reasoning a client sends back (Anthropic's thinking ``signature``, the
Responses reasoning item's ``encrypted_content``) against the organisation that produced it: an
account of another organisation cannot read it and answers 400. A pool that moves a conversation
to another account meets exactly that. The scripted upstream's signatures carry a keyed digest of
the account key that minted them (``sig-<tag>-<random>``), and each endpoint refuses one minted by
another key in the provider's own words:

- Anthropic: 400 ``invalid_request_error`` "messages.1.content.0: Invalid `signature` in `thinking` block";
- Responses: 400 ``invalid_request_error``, code ``invalid_encrypted_content``, "The encrypted content
  sig-…a1b2 could not be verified.".

Signatures of any other shape (a test's own, another upstream's) are let through as before.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from translation import ir

_MINTED = re.compile(r"sig-([0-9a-f]{10})-[0-9a-f]+")


@dataclass(frozen=True)
class Refusal:
    message: str
    code: str | None = None


def account_tag(key: str) -> str:
    """A keyed digest of the account key (never the key itself)."""

    return hmac.new(b"mockupstream-account", key.encode(), hashlib.sha256).hexdigest()[:10]


def mint(key: str) -> str:
    return f"sig-{account_tag(key)}-{secrets.token_hex(12)}"


def minted_elsewhere(signature: Any, key: str) -> bool:
    """A signature this upstream minted for another account key."""

    match = _MINTED.fullmatch(signature) if isinstance(signature, str) else None
    return match is not None and not hmac.compare_digest(match[1], account_tag(key))


def bind(events: Iterable[Any], key: str) -> None:
    """Every signature a plan's events carry, minted for ``key``."""

    for event in events:
        if isinstance(event, ir.BlockDelta) and event.kind == "signature":
            event.text = mint(key)


def _shortened(text: str) -> str:
    return f"{text[:4]}...{text[-4:]}"


def refusal(protocol: str, body: Any, key: str) -> Refusal | None:
    """The 400 for the first piece of reasoning in ``body`` that another account minted; None when there is none."""

    if not isinstance(body, dict):
        return None
    if protocol == "anthropic":
        messages = body.get("messages")
        for i, msg in enumerate(messages if isinstance(messages, list) else []):
            content = msg.get("content") if isinstance(msg, dict) else None
            for j, block in enumerate(content if isinstance(content, list) else []):
                if (isinstance(block, dict) and block.get("type") == "thinking"
                        and minted_elsewhere(block.get("signature"), key)):
                    return Refusal(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
    elif protocol == "responses":
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") == "reasoning":
                sealed = item.get("encrypted_content")
                if isinstance(sealed, str) and minted_elsewhere(sealed, key):
                    return Refusal(f"The encrypted content {_shortened(sealed)} could not be verified.",
                                   "invalid_encrypted_content")
    return None
