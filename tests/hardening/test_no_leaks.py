"""The red team's findings, reproduced from outside against real servers: no upstream address in a
client's error, no secret in the request log or the dashboard, nosniff on every answer.
"""

from __future__ import annotations

import http.server
import random
import socket
import string
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from accounts.config_file import load
from accounts.models import RequestLog
from tests.accounts.test_redact import IN_CONTEXT, SAMPLES
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.hardening.envelope import CHAT, COUNT, MSGS, RESP, check_error_envelope
from tests.hardening.raw_http import read_answer
from tests.servers import Server, database_url, free_port, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)

AUTH = {"authorization": f"Bearer {CLIENT_KEY}"}
PATHS = {"openai_chat": CHAT, "anthropic": MSGS, "responses": RESP}
HIDDEN_HOST = "internal-llm.example.invalid"
PROXY_PASSWORD = "proxy-pw-" + "".join(random.Random(1).choices(string.ascii_letters, k=12))


def request_body(path: str, model: str, stream: bool, text: str = "hi") -> dict[str, Any]:
    if path == CHAT:
        return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}
    if path == MSGS:
        return {"model": model, "stream": stream, "max_tokens": 50, "messages": [{"role": "user", "content": text}]}
    if path == COUNT:
        return {"model": model, "messages": [{"role": "user", "content": text}]}
    return {"model": model, "stream": stream, "input": text}


def log_row(model: str, timeout: float = 10.0) -> RequestLog:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = RequestLog.objects.filter(model_requested=model).first()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"no request-log row for {model}")


# ----------------------------------------------------------------- upstream addresses


class ErrorPages(http.server.BaseHTTPRequestHandler):
    """A proxy in front of a dead upstream: HTML error pages that name the upstream's inside."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status = 400 if self.path.endswith("/count_tokens") else 502
        page = (f"<html><body><h1>ERROR</h1><p>The requested URL http://{HIDDEN_HOST}:8443{self.path} could "
                f"not be retrieved: connection to 10.1.2.3:8443 failed.</p></body></html>").encode()
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def error_pages() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ErrorPages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def unreachable(transactional_db: Any, mock_upstream: Server, gateway: Server,
                error_pages: str) -> dict[str, dict[str, Any]]:
    """Providers that cannot be reached, each with what a client must not learn and ops must."""

    closed, proxy_port = free_port(), free_port()
    cases = {
        "closed": {"base_url": f"http://127.0.0.1:{closed}/v1", "kind": "(connection refused)",
                   "hidden": ["127.0.0.1", str(closed)], "trace": f"127.0.0.1:{closed}"},
        "nameless": {"base_url": f"http://{HIDDEN_HOST}:8443/v1", "kind": "(host name not resolved)",
                     "hidden": [HIDDEN_HOST, "8443"], "trace": f"{HIDDEN_HOST}:8443"},
        "proxied": {"base_url": f"{mock_upstream.url}/v1", "kind": "(proxy error)",
                    "proxy_url": f"http://ops:{PROXY_PASSWORD}@127.0.0.1:{proxy_port}",
                    "hidden": ["127.0.0.1", str(proxy_port), PROXY_PASSWORD], "trace": f"127.0.0.1:{proxy_port}"},
    }
    config = pool_config(mock_upstream)
    for name, case in cases.items():
        config["providers"].append({
            "name": name, "protocol": "openai_chat", "base_url": case["base_url"], "models": [],
            "connect_timeout": 3.0, "proxy_url": case.get("proxy_url", ""),
            "accounts": [{"label": f"{name}-0", "api_key": f"sk-good-{name}"}]})
    config["providers"].append({"name": "paged", "protocol": "anthropic", "base_url": error_pages, "models": [],
                                "accounts": [{"label": "paged-0", "api_key": "sk-good-paged"}]})
    load(config)
    return cases


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("client", list(PATHS))
def test_an_unreachable_upstream_is_named_to_ops_only(unreachable: dict[str, dict[str, Any]], gateway: Server,
                                                      client: str, stream: bool) -> None:
    path = PATHS[client]
    for name, case in unreachable.items():
        model = f"{name}/m-{uuid.uuid4().hex[:8]}"
        resp = httpx.post(gateway.url + path, json=request_body(path, model, stream), headers=AUTH, timeout=30)
        assert resp.status_code == 502, (name, resp.text)
        body = check_error_envelope(path, 502, resp.headers, resp.content, client_error=False)
        assert body["error"]["message"] == f"The upstream could not be reached {case['kind']}", name
        for hidden in case["hidden"]:
            assert hidden not in resp.text, (name, hidden, resp.text)
        assert resp.headers["x-content-type-options"] == "nosniff"
        # The attempt trace (staff only) says where the gateway tried; never a password.
        [attempt] = log_row(model).attempts
        assert attempt["verdict"] == "network" and case["trace"] in attempt["error"], attempt
        assert PROXY_PASSWORD not in attempt["error"]


def test_an_error_page_from_in_between_reaches_the_client_as_its_status_only(
        unreachable: dict[str, dict[str, Any]], gateway: Server) -> None:
    for path in (CHAT, MSGS, COUNT):
        model = f"paged/m-{uuid.uuid4().hex[:8]}"
        resp = httpx.post(gateway.url + path, json=request_body(path, model, False), headers=AUTH, timeout=30)
        expected = 400 if path == COUNT else 502
        body = check_error_envelope(path, expected, resp.headers, resp.content, client_error=False)
        assert HIDDEN_HOST not in resp.text and "10.1.2.3" not in resp.text, resp.text
        assert body["error"]["message"] == f"The upstream answered HTTP {expected} with an error page, not an API error"
        if path != COUNT:  # count_tokens asks outside the dispatch loop and keeps no trace
            [attempt] = log_row(model).attempts
            assert HIDDEN_HOST in attempt["error"]


def test_the_models_list_names_no_upstream(unreachable: dict[str, dict[str, Any]], gateway: Server) -> None:
    resp = httpx.get(gateway.url + "/v1/models", headers=AUTH, timeout=30)
    assert resp.status_code == 200
    assert HIDDEN_HOST not in resp.text and "127.0.0.1" not in resp.text and PROXY_PASSWORD not in resp.text


# ----------------------------------------------------------------- secrets in logged bodies


ACCOUNT_KEY = "".join(random.Random(2).choices("0123456789abcdef", k=48))  # no vendor shape: only the pool knows it
SECRETS = [secret for _, secret in SAMPLES] + [secret for _, _, secret, _ in IN_CONTEXT] + [ACCOUNT_KEY]
TEXTS = [secret for _, secret in SAMPLES] + [text for _, text, _, _ in IN_CONTEXT] + [f"the pool's key {ACCOUNT_KEY}"]


def pieces(secret: str) -> list[str]:
    """Parts of a secret that must not be stored either: its middle, and its tail (a model's last delta)."""

    flat = secret.replace("\n", "")
    return [flat[len(flat) // 3: len(flat) // 3 + 10], flat[-10:]]


@pytest.fixture(scope="module")
def logging_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    server = start_gateway(url, {"GATEWAY_LOG_BODIES": "1"})
    yield server
    server.stop()


def shell_turn(client: str, marker: str, stream: bool) -> tuple[str, dict[str, Any]]:
    """A conversation whose last turn returns every secret as a tool result: the scripted upstream
    (``mock-shell``) answers "The command printed: <the result>", so the answer echoes them all."""

    result = f"{marker}\n" + "\n".join(TEXTS)
    prompt = f"run `echo {marker}` please; my notes: " + " ".join(TEXTS[:5])
    schema = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    if client == "openai_chat":
        return CHAT, {"model": "up-openai_chat/mock-shell", "stream": stream, "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                                  "function": {"name": "Bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": result}],
            "tools": [{"type": "function", "function": {"name": "Bash", "parameters": schema}}]}
    return MSGS, {"model": "up-openai_chat/mock-shell", "stream": stream, "max_tokens": 4000, "messages": [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}],
        "tools": [{"name": "Bash", "input_schema": schema}]}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("client", ["openai_chat", "anthropic"])
def test_no_secret_typed_into_a_prompt_or_echoed_back_is_stored_or_shown(
        transactional_db: Any, mock_upstream: Server, logging_gateway: Server, client: str, stream: bool) -> None:
    load(pool_config(mock_upstream, {"openai_chat": [ACCOUNT_KEY]}))
    marker = f"marker-{uuid.uuid4().hex}"
    path, body = shell_turn(client, marker, stream)
    resp = httpx.post(logging_gateway.url + path, json=body, headers=AUTH, timeout=30)
    assert resp.status_code == 200, resp.text
    assert sum(secret in resp.text.replace("\\n", "\n") for secret in SECRETS) > len(SECRETS) // 2  # echoed
    deadline = time.monotonic() + 10
    # Bodies are encrypted at rest (the database cannot search them): the latest rows, read through the model.
    while (row := next((r for r in RequestLog.objects.order_by("-created_at")[:20] if marker in r.request_body),
                       None)) is None:
        assert time.monotonic() < deadline, "no request-log row"
        time.sleep(0.05)

    assert "[redacted]" in row.request_body and "[redacted]" in row.response_body
    assert marker in row.response_body  # the answer is kept, only the secrets are not
    stored = row.request_body + row.response_body + orjson.dumps(row.attempts).decode()
    for secret in SECRETS:
        assert secret not in stored.replace("\\n", "\n").replace("\\\\n", "\n"), secret
        for piece in pieces(secret):
            assert piece not in stored, (secret, piece)
    staff = User.objects.create_user(f"ops-{marker}", password="x", is_staff=True, is_superuser=True)
    browser = Client()
    browser.force_login(staff)
    for url in (reverse("dashboard:requests"), reverse("dashboard:request", args=[row.request_id]),
                reverse("dashboard:overview")):
        page = browser.get(url).content.decode()
        for secret in SECRETS:
            assert secret not in page and pieces(secret)[1] not in page, (url, secret)


# ----------------------------------------------------------------- nosniff


def raw_request(server: Server, data: bytes, then: bytes = b"", repeat: int = 0) -> tuple[int, httpx.Headers]:
    """Send ``data``, then ``then`` up to ``repeat`` times or until the server stops reading; its answer."""

    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(data)
        try:
            for _ in range(repeat):
                sock.sendall(then)
        except OSError:  # cut off after the answer
            pass
        status, headers, _ = read_answer(sock, 10.0)
        return status, headers


def test_every_answer_of_every_layer_carries_nosniff(pool: Any, gateway: Server) -> None:
    answers: dict[str, httpx.Response] = {
        "200 json": httpx.post(gateway.url + CHAT, json=request_body(CHAT, "up-openai_chat/mock-text", False),
                               headers=AUTH),
        "200 sse": httpx.post(gateway.url + CHAT, json=request_body(CHAT, "up-openai_chat/mock-text", True),
                              headers=AUTH),
        "200 models": httpx.get(gateway.url + "/v1/models", headers=AUTH),
        "401": httpx.post(gateway.url + MSGS, json=request_body(MSGS, "m", False)),
        "404": httpx.post(gateway.url + "/v1/nowhere", headers=AUTH, json={}),
        "405": httpx.get(gateway.url + CHAT, headers=AUTH),
        "200 preflight": httpx.options(gateway.url + CHAT),
        "200 health": httpx.get(gateway.url + "/healthz"),
        "302 page": httpx.get(gateway.url + "/dashboard/"),
        "200 login page": httpx.get(gateway.url + "/admin/login/"),
        "200 static": httpx.get(gateway.url + "/static/admin/css/base.css"),
        "404 page": httpx.get(gateway.url + "/no-such-page/"),
    }
    assert answers["200 sse"].headers["content-type"].startswith("text/event-stream")
    assert answers["200 static"].status_code == 200
    for name, resp in answers.items():
        assert resp.headers.get("x-content-type-options") == "nosniff", (name, resp.status_code, resp.headers)
    # Answers no HTTP client library sends a request for: a body over the limit, a head over the limit.
    too_large, headers = raw_request(gateway, (f"POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                                               f"content-length: {64 * 1024 * 1024}\r\n\r\n").encode())
    assert too_large == 413 and headers["x-content-type-options"] == "nosniff"
    too_long, headers = raw_request(gateway, f"POST {CHAT} HTTP/1.1\r\nhost: x\r\n".encode(),
                                    b"x-pad: " + b"a" * 8000 + b"\r\n", repeat=1000)
    assert too_long == 431 and headers["x-content-type-options"] == "nosniff"
