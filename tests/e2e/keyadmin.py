"""The gateway's own admin driven over HTTP as a staff member's browser would: a client key list's
actions (with their confirmation form when they have one), for the key-lifecycle tests."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import anthropic
import httpx
import openai

from accounts.models import ApiKey
from tests.e2e import clients
from tests.servers import Server

CHAT_MODEL = "up-openai_chat/mock-text"
MESSAGES_MODEL = "up-anthropic/mock-text"
KEYS_URL = "/admin/accounts/apikey/"


def csrf_token(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, "no CSRF token on the page"
    return found.group(1)


def key_action(gateway: Server, cookies: dict[str, str], action: str, keys: Sequence[ApiKey],
               **confirm: str) -> str:
    """Tick ``keys`` in the key list, run ``action``; with ``confirm``, fill its form and submit it.
    Returns the page the admin answers with last."""

    url = gateway.url + KEYS_URL
    with httpx.Client(cookies=cookies, timeout=10.0, follow_redirects=True) as http:
        listing = http.get(url)
        assert listing.status_code == 200, listing.text[:300]
        chosen = {"_selected_action": [str(k.pk) for k in keys], "action": action}
        form = {"csrfmiddlewaretoken": csrf_token(listing.text), "index": "0", **chosen}
        answer = http.post(url, data=form, headers={"Referer": url})
        assert answer.status_code == 200, answer.text[:2000]
        if confirm:
            fields = {"csrfmiddlewaretoken": csrf_token(answer.text), "apply": "yes", **chosen, **confirm}
            answer = http.post(url, data=fields, headers={"Referer": url})
            assert answer.status_code == 200, answer.text[:2000]
        return answer.text


def revealed_secrets(page: str) -> list[str]:
    """The new secrets a reveal page shows, in its order."""

    return re.findall(r'value="(gw-[A-Za-z0-9_\-]+)"', page)


def chat(gateway: Server, key: str, model: str = CHAT_MODEL) -> tuple[int, str]:
    """(status, the refusal's message or "") of one chat request through the official SDK."""

    try:
        clients.openai_client(gateway.url, key).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}])
    except openai.APIStatusError as refused:
        body: Any = refused.body
        return refused.status_code, body.get("message", "") if isinstance(body, dict) else str(body)
    return 200, ""


def message(gateway: Server, key: str, model: str = MESSAGES_MODEL) -> tuple[int, str, Any]:
    """(status, the refusal's message or "", the error's raw response or None) of one Messages request."""

    try:
        clients.anthropic_client(gateway.url, key).messages.create(
            model=model, max_tokens=50, messages=[{"role": "user", "content": "hi"}])
    except anthropic.APIStatusError as refused:
        body: Any = refused.body
        error = body.get("error", {}) if isinstance(body, dict) else {}
        return refused.status_code, f"{error.get('type', '')}: {error.get('message', '')}", refused.response
    return 200, "", None
