"""A real Claude Code signed in to the gateway as a developer, through the device flow, for the tests
that need a signed-in session (the sign-in itself, the usage notice Claude Code shows only then)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.clients import agents
from tests.servers import Server
from tests.signin import web

PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class SignedIn:
    user: Any  # the Django user
    home: Path  # the CLI's HOME, holding its stored sign-in
    work: Path  # the working directory to run it in
    login: agents.GatewayLogin  # what the CLI said while signing in

    @property
    def bearer(self) -> str:
        stored = json.loads((self.home / ".claude" / ".credentials.json").read_text())["enterpriseGateway"]
        return str(stored["jwt"])


def sign_in(gateway: Server, tmp_path: Path, username: str = "dana") -> SignedIn:
    """A developer ``username`` (a Django user with a password) and ``claude`` signed in as them: the CLI's
    own ``auth login --gateway-json``, the code approved on the verification page in a logged-in browser."""

    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username, f"{username}@example.com", PASSWORD)
    browser = web.Browser(gateway.url)
    assert browser.login(username, PASSWORD).status_code == 200
    approvals: list[int] = []
    home, work = agents.dirs(tmp_path)
    login = agents.claude_code_gateway_login(gateway.url, home, lambda code: approvals.append(
        browser.approve(code).status_code))
    browser.close()
    why = login.transcript()
    assert login.returncode == 0 and login.names[-1] == "done", why
    assert approvals == [200], why
    return SignedIn(user, home, work, login)
