"""The Responses websocket obeys the HTTP path's limits.

- A continuation's assembled request (the conversation written out, then the new items) went upstream
  at 12, 24, 36 MB over one socket, past the 32 MiB a body may have over HTTP: now the turn that would
  pass it gets an ``error`` frame with the 413 in the body limit's words, and nothing goes upstream.
- A client key holds at most ``GATEWAY_MAX_SOCKETS_PER_KEY`` sockets open.
- A frame nested 600 levels deep gets the HTTP path's 400, not a 500 and a traceback.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway, received

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "up-responses/mock-text"
ENDINGS = {"response.completed", "response.failed", "error"}


def socket(gateway: Server, key: str = CLIENT_KEY) -> ClientConnection:
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    return connect(url, additional_headers={"Authorization": f"Bearer {key}"}, open_timeout=10,
                   max_size=None, close_timeout=5)


def turn(ws: ClientConnection, **fields: Any) -> dict[str, Any]:
    """One ``response.create``; the frame that ends it."""

    ws.send(json.dumps({"type": "response.create", **fields}))
    while True:
        frame = json.loads(ws.recv(timeout=120))
        if frame["type"] in ENDINGS:
            return frame  # type: ignore[no-any-return]


def peak_rss_mb(server: Server) -> float:
    with open(f"/proc/{server.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def socket_gateway(pool: Any, django_db_blocker: Any) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_MAX_SOCKETS_PER_KEY": "2"}) as server:
        yield server


def test_a_continuation_past_the_body_limit_is_refused_and_nothing_goes_upstream(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    limit = 32 * 1024 * 1024
    message = "lorem ipsum " * (12 * 1024 * 1024 // 12)  # 12 MB a message: the conversation passes 32 MiB
    rss_before = peak_rss_mb(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    frames = []
    with socket(gateway) as ws:
        previous = None
        for _ in range(4):
            frame = turn(ws, model=MODEL, input=message,
                         **({"previous_response_id": previous} if previous else {}))
            frames.append(frame)
            if frame["type"] == "response.completed":
                previous = frame["response"]["id"]
    sizes = [len(orjson.dumps(r["body"])) for r in received(mock_upstream) if r["path"] == "/v1/responses"]
    rss_after = peak_rss_mb(gateway)
    print(f"\nsent upstream: {[round(s / 2**20, 1) for s in sizes]} MB (total {sum(sizes) / 2**20:.0f} MB); "
          f"peak RSS {rss_before:.0f} → {rss_after:.0f} MB")
    assert [f["type"] for f in frames] == ["response.completed", "response.completed", "error", "error"]
    for refused in frames[2:]:
        assert refused["status"] == 413
        assert refused["error"]["message"].startswith(f"The request body exceeds the limit of {limit} bytes")
    assert len(sizes) == 2 and max(sizes) <= limit


def test_a_key_holds_at_most_its_cap_of_open_sockets(socket_gateway: Server) -> None:
    with socket(socket_gateway) as first, socket(socket_gateway):
        with socket(socket_gateway) as third:
            refusal = json.loads(third.recv(timeout=10))
            with pytest.raises(ConnectionClosed) as closed:
                third.recv(timeout=10)
        assert refusal["type"] == "error" and refusal["status"] == 429
        assert "limited to 2 open websockets" in refusal["error"]["message"]
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429
        assert turn(first, model=MODEL, input="hi")["type"] == "response.completed"  # the open ones serve
    deadline = time.monotonic() + 5  # closed: the slots come back
    while True:
        with socket(socket_gateway) as again:
            frame = turn(again, model=MODEL, input="hi")
        if frame["type"] == "response.completed" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert frame["type"] == "response.completed"


def test_another_key_is_not_held_back_by_one_at_its_cap(socket_gateway: Server, mock_upstream: Server) -> None:
    other = f"gw-sockets-{uuid.uuid4().hex}"
    config = pool_config(mock_upstream)
    config["client_keys"].append({"name": other[-12:], "key": other})
    load(config)
    with socket(socket_gateway), socket(socket_gateway), socket(socket_gateway, other) as theirs:
        assert turn(theirs, model=MODEL, input="hi")["type"] == "response.completed"


def test_a_frame_nested_600_levels_deep_is_a_400_and_the_socket_serves_on(pool: Any, gateway: Server) -> None:
    deep = "[" * 600 + "]" * 600
    with socket(gateway) as ws:
        ws.send('{"type": "response.create", "model": "%s", "input": "hi", "metadata": {"x": %s}}' % (MODEL, deep))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error" and frame["status"] == 400
        assert frame["error"]["message"] == "The request body nests JSON too deeply"
        assert turn(ws, model=MODEL, input="hi")["type"] == "response.completed"
    over_http = httpx.post(gateway.url + "/v1/responses", headers={"Authorization": f"Bearer {CLIENT_KEY}"},
                           content=b'{"model": "%s", "input": "hi", "metadata": {"x": %s}}' % (
                               MODEL.encode(), deep.encode()))
    assert over_http.status_code == 400 and over_http.json()["error"] == frame["error"]

