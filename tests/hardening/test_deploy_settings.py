"""The production environment the README documents passes ``check --deploy``, and HTTPS behind a
proxy redirects pages only: never the API nor the health checks."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.servers import ROOT, Server, database_url, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)


def documented_environment() -> dict[str, str]:
    """The variables of the README's Production block, its placeholders filled with fresh random values."""

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Production", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README: no environment block under Production"
    env: dict[str, str] = {}
    for line in block[1].splitlines():
        name, _, value = line.split("#", 1)[0].strip().partition("=")
        if name:
            env[name] = secrets.token_urlsafe(50) if value.startswith("<") else value
    assert env["GATEWAY_BEHIND_TLS"] == "1" and env["DEBUG"] == "0"
    return env


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Only the documented variables (and what runs Python): nothing of this test run's settings leaks in.
    clean = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)


def test_the_documented_production_environment_passes_check_deploy() -> None:
    result = check_deploy(documented_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_without_the_tls_settings_check_deploy_names_what_is_missing() -> None:
    env = {k: v for k, v in documented_environment().items() if k != "GATEWAY_BEHIND_TLS"}
    result = check_deploy(env)
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in result.stdout + result.stderr


@pytest.fixture(scope="module")
def tls_gateway(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Server]:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    server = start_gateway(url, {"GATEWAY_BEHIND_TLS": "1", "DEBUG": "0"})
    yield server
    server.stop()


def test_behind_tls_pages_go_to_https_and_the_api_and_health_checks_are_answered_where_asked(
        tls_gateway: Server) -> None:
    page = httpx.get(tls_gateway.url + "/admin/login/")
    assert page.status_code == 301 and page.headers["location"].startswith("https://")
    secure = httpx.get(tls_gateway.url + "/admin/login/", headers={"X-Forwarded-Proto": "https"})
    assert secure.status_code == 200
    assert secure.headers["strict-transport-security"] == "max-age=31536000"
    assert "secure" in secure.headers["set-cookie"].lower()  # the CSRF cookie
    for path in ("/healthz", "/readyz"):
        assert httpx.get(tls_gateway.url + path).status_code == 200, path
    api = httpx.post(tls_gateway.url + "/v1/chat/completions", json={"model": "m", "messages": []})
    assert api.status_code == 401 and api.headers["x-content-type-options"] == "nosniff"
