"""/v1/responses over a websocket (Codex's ``supports_websockets``), on a real gateway and the scripted upstream.

``response.create`` messages go in, the events of the SSE stream come out one JSON text frame each;
several turns share one socket; the HTTP path's auth, pool, retries and request log apply per turn.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from accounts.config_file import load
from accounts.models import RequestLog
from accounts.outcomes import ErrorClass
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

ENDINGS = {"response.completed", "response.failed", "response.incomplete", "error"}
BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06"}


def socket(gateway: Server, key: str = CLIENT_KEY) -> ClientConnection:
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    return connect(url, additional_headers={"Authorization": f"Bearer {key}", **BETA}, open_timeout=10)


def turn(ws: ClientConnection, **fields: Any) -> list[dict[str, Any]]:
    """One ``response.create`` and the frames it brought, up to the one that ends the turn."""

    ws.send(json.dumps({"type": "response.create", "stream": True, **fields}))
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1]["type"] not in ENDINGS:
        frames.append(json.loads(ws.recv(timeout=15)))
    return frames


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def unique(model: str) -> str:
    return f"{model}-{uuid.uuid4().hex[:8]}"


def sse_types(gateway: Server, body: dict[str, Any]) -> list[str]:
    """The event types of the same request over HTTP, as its SSE stream's data says them."""

    with httpx.stream("POST", gateway.url + "/v1/responses", json={**body, "stream": True}, timeout=15,
                      headers={"Authorization": f"Bearer {CLIENT_KEY}"}) as r:
        assert r.status_code == 200
        datas = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
    return [json.loads(d)["type"] for d in datas if d != "[DONE]"]


def log_rows(models: list[str], timeout: float = 10.0) -> list[RequestLog]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = list(RequestLog.objects.filter(model_requested__in=models).order_by("created_at"))
        if len(rows) >= len(models):
            return rows
        time.sleep(0.05)
    raise AssertionError(f"request-log rows for {models}: {RequestLog.objects.filter(model_requested__in=models)}")


def text_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "response.output_text.delta")


@pytest.fixture
def setup(transactional_db: Any, mock_upstream: Server, gateway: Server) -> Iterator[None]:
    load(pool_config(mock_upstream))
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    yield


@pytest.mark.parametrize("upstream", ["responses", "openai_chat"])
def test_a_turn_sends_the_same_events_as_the_sse_stream(setup: None, gateway: Server, upstream: str) -> None:
    body = {"model": f"up-{upstream}/mock-hello", "input": "hi"}
    with socket(gateway) as ws:
        frames = turn(ws, **body)
    assert [f["type"] for f in frames] == sse_types(gateway, body)
    assert frames[0]["type"] == "response.created" and frames[-1]["type"] == "response.completed"
    assert text_of(frames) and text_of(frames) in json.dumps(frames[-1]["response"]["output"])


def test_two_turns_on_one_socket_continue_with_previous_response_id(setup: None, gateway: Server,
                                                                    mock_upstream: Server) -> None:
    """As in OpenAI's websocket mode: the second turn names the first response and sends only what is new;
    the upstream gets the whole conversation, so it works with ``store: false`` on any upstream."""

    model = unique("up-responses/mock-chat")
    with socket(gateway) as ws:
        first = turn(ws, model=model, input=[user("first question")], store=False)
        first_id = first[-1]["response"]["id"]
        answer = text_of(first)
        second = turn(ws, model=model, input=[user("second question")], store=False, previous_response_id=first_id)
    assert second[-1]["type"] == "response.completed" and second[-1]["response"]["id"] != first_id
    bodies = [r["body"] for r in received(mock_upstream) if r["body"].get("model") == model.split("/", 1)[1]]
    assert len(bodies) == 2
    sent = json.dumps(bodies[1]["input"])
    assert "previous_response_id" not in bodies[1] or bodies[1]["previous_response_id"] is None
    assert sent.index("first question") < sent.index(answer) < sent.index("second question")


def test_a_previous_response_id_the_socket_does_not_know_is_read_from_the_store_or_refused(
        setup: None, gateway: Server, mock_upstream: Server) -> None:
    """Not the socket's last response: the view's conversation store answers for it, as over HTTP —
    an id stored for this key continues its conversation, any other is a 404 and nobody is asked."""

    model = unique("up-responses/mock-stored")
    with socket(gateway) as ws:
        refused = turn(ws, model=model, input="go on", previous_response_id="resp_nobody_stored")
        assert refused[-1]["type"] == "error" and refused[-1]["status"] == 404
        assert refused[-1]["error"]["param"] == "previous_response_id"
        assert not [r for r in received(mock_upstream) if r["body"].get("model") == model.split("/", 1)[1]]
        first = clients.openai_client(gateway.url, CLIENT_KEY).responses.create(model=model, input="the prompt")
        frames = turn(ws, model=model, input="go on", previous_response_id=first.id)
    assert frames[-1]["type"] == "response.completed"
    bodies = [r["body"] for r in received(mock_upstream) if r["body"].get("model") == model.split("/", 1)[1]]
    # The account that answered gets its own id back; any other, the conversation written out.
    assert len(bodies) == 2
    assert bodies[1].get("previous_response_id") == first.id or "the prompt" in json.dumps(bodies[1]["input"])


def test_a_warm_up_answers_at_once_and_the_next_turn_continues_it(setup: None, gateway: Server,
                                                                  mock_upstream: Server) -> None:
    """Codex's ``generate: false``: no upstream call; the next turn sends its input on top of the warm-up's."""

    model = unique("up-responses/mock-warm")
    with socket(gateway) as ws:
        warm = turn(ws, model=model, input=[user("the prompt")], generate=False)
        assert [f["type"] for f in warm] == ["response.created", "response.completed"]
        assert warm[-1]["response"]["output"] == []
        real = turn(ws, model=model, input=[], previous_response_id=warm[-1]["response"]["id"])
    assert real[-1]["type"] == "response.completed"
    bodies = [r["body"] for r in received(mock_upstream) if r["body"].get("model") == model.split("/", 1)[1]]
    assert len(bodies) == 1 and "the prompt" in json.dumps(bodies[0]["input"])


def test_a_bad_key_is_refused_with_an_error_frame_and_a_4401_close(setup: None, gateway: Server) -> None:
    with socket(gateway, "gw-not-a-key") as ws:
        frame = json.loads(ws.recv(timeout=10))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert frame["type"] == "error" and frame["status"] == 401
    assert frame["error"]["message"] == "Invalid API key"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


def test_each_turn_gets_its_request_log_row_marked_websocket(setup: None, gateway: Server) -> None:
    models = [unique("up-responses/mock-row"), unique("up-openai_chat/mock-row")]
    with socket(gateway) as ws:
        for model in models:
            assert turn(ws, model=model, input="hi")[-1]["type"] == "response.completed"
    over_http = unique("up-responses/mock-row")
    sse_types(gateway, {"model": over_http, "input": "hi"})
    rows = log_rows([*models, over_http])
    assert [(r.model_requested, r.status, r.stream, r.client_protocol, r.transport) for r in rows] == [
        (m, 200, True, "responses", "websocket") for m in models] + [(over_http, 200, True, "responses", "http")]
    assert all(r.output_tokens > 0 for r in rows)


def test_an_upstream_failure_before_the_first_event_is_retried_on_the_next_account(
        transactional_db: Any, gateway: Server, mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, {"responses": ["sk-fail-429-ws", "sk-good-ws"]}))
    seen(gateway)
    model = unique("up-responses/mock-retry")
    with socket(gateway) as ws:
        frames = turn(ws, model=model, input="hi")
    assert frames[-1]["type"] == "response.completed" and not [f for f in frames if f["type"] == "error"]
    (row,) = log_rows([model])
    assert row.status == 200 and row.attempt_count == 2


def test_a_turn_every_account_refuses_ends_with_an_error_frame_and_the_socket_stays_usable(
        transactional_db: Any, gateway: Server, mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, {"responses": ["sk-fail-401-ws"], "openai_chat": ["sk-good-ws"]}))
    seen(gateway)
    with socket(gateway) as ws:
        failed = turn(ws, model="up-responses/mock-x", input="hi")
        after = turn(ws, model="up-openai_chat/mock-x", input="hi")
    assert failed[-1]["type"] == "error" and failed[-1]["status"] >= 400 and failed[-1]["error"]["message"]
    assert after[-1]["type"] == "response.completed"


def test_a_mid_stream_upstream_death_ends_the_turn_with_a_failed_response(setup: None, gateway: Server) -> None:
    with socket(gateway) as ws:
        died = turn(ws, model="up-openai_chat/mock-disconnect", input="hi")
        again = turn(ws, model="up-responses/mock-x", input="hi")
    assert [f["type"] for f in died][-1] == "response.failed"
    assert any(f["type"] == "response.output_text.delta" for f in died)
    assert again[-1]["type"] == "response.completed"


def test_a_message_that_is_no_response_create_gets_an_error_frame(setup: None, gateway: Server) -> None:
    with socket(gateway) as ws:
        ws.send("not json")
        bad = json.loads(ws.recv(timeout=10))
        ws.send(json.dumps({"type": "session.update"}))
        unknown = json.loads(ws.recv(timeout=10))
        ok = turn(ws, model="up-responses/mock-x", input="hi")
    assert (bad["type"], bad["status"]) == ("error", 400) and "JSON" in bad["error"]["message"]
    assert (unknown["type"], unknown["status"]) == ("error", 400) and "response.create" in unknown["error"]["message"]
    assert ok[-1]["type"] == "response.completed"


def test_a_client_that_leaves_mid_turn_cancels_the_upstream(setup: None, gateway: Server,
                                                            mock_upstream: Server) -> None:
    model = "up-responses/mock-slow-200x50"  # the whole name is the scenario: 200 deltas 50 ms apart
    with socket(gateway) as ws:
        ws.send(json.dumps({"type": "response.create", "model": model, "input": "hi", "stream": True}))
        while json.loads(ws.recv(timeout=15))["type"] != "response.output_text.delta":
            pass
    (row,) = log_rows([model])
    assert row.error_class == ErrorClass.CLIENT_DISCONNECTED
    deadline = time.monotonic() + 10
    while httpx.get(mock_upstream.url + "/_mock/stats").json()["streams_cancelled"] < 1:
        assert time.monotonic() < deadline, "the upstream stream was not cancelled"
        time.sleep(0.05)


def test_daphne_serves_the_socket_too(transactional_db: Any, django_db_blocker: Any, mock_upstream: Server) -> None:
    with own_gateway(django_db_blocker, server="daphne") as daphne:
        load(pool_config(mock_upstream))
        seen(daphne)
        with socket(daphne) as ws:
            first = turn(ws, model="up-responses/mock-x", input=[user("one")])
            second = turn(ws, model="up-openai_chat/mock-x", input=[user("two")],
                          previous_response_id=first[-1]["response"]["id"])
        with socket(daphne, "gw-not-a-key") as refused:
            frame = json.loads(refused.recv(timeout=10))
    assert first[-1]["type"] == second[-1]["type"] == "response.completed"
    assert frame["status"] == 401


def test_the_keys_rate_limit_counts_each_turn_and_refuses_in_an_error_frame(
        transactional_db: Any, gateway: Server, mock_upstream: Server) -> None:
    config = pool_config(mock_upstream)
    config["client_keys"] = [{"name": "ws-limited", "key": "gw-ws-limited", "rate_limit_per_minute": 2}]
    load(config)
    seen(gateway)
    with socket(gateway, "gw-ws-limited") as ws:
        ends = [turn(ws, model="up-responses/mock-x", input="hi")[-1] for _ in range(3)]
    assert [e["type"] for e in ends] == ["response.completed", "response.completed", "error"]
    assert ends[2]["status"] == 429 and ends[2]["headers"]["retry-after"]


def test_a_second_response_create_during_a_turn_is_refused_and_the_turn_goes_on(setup: None, gateway: Server) -> None:
    with socket(gateway) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "up-responses/mock-slow-10x50", "input": "hi"}))
        ws.send(json.dumps({"type": "response.create", "model": "up-responses/mock-x", "input": "hi"}))
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["type"] != "response.completed":
            frames.append(json.loads(ws.recv(timeout=15)))
    refused = [f for f in frames if f["type"] == "error"]
    assert len(refused) == 1 and refused[0]["status"] == 400 and "in progress" in refused[0]["error"]["message"]
    assert frames[-1]["response"]["model"] == "up-responses/mock-slow-10x50"


def test_codex_compaction_trigger_over_the_socket_on_a_chat_upstream(setup: None, gateway: Server,
                                                                    mock_upstream: Server) -> None:
    """The gateway's own answer to a compaction trigger (a Chat upstream cannot compact) arrives as
    frames like any other, and the next turn on the socket reaches the upstream with the summary."""

    model = unique("up-openai_chat/mock-text")
    with socket(gateway) as ws:
        frames = turn(ws, model=model, input=[user("The codename is Heron."), {"type": "compaction_trigger"}])
        assert frames[-1]["type"] == "response.completed"
        [item] = [i for i in frames[-1]["response"]["output"] if i["type"] == "compaction"]
        assert item["encrypted_content"] and "Heron" not in item["encrypted_content"]
        after = turn(ws, model=model, input=[item, user("What is the codename?")])
    assert after[-1]["type"] == "response.completed"
    asked = [r["body"] for r in received(mock_upstream) if r["body"].get("model") == model.split("/", 1)[1]][-1]
    said = json.dumps(asked["messages"])
    assert "Summary of the conversation so far" in said and "Heron" in said and "gwc1." not in said
