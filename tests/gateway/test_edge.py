"""The edge as a server sees it (an ASGI app called with scope, receive and send), on a gateway
built from fakes: which paths are the API's, errors in the path's envelope, CORS, the body limit,
the drain, and a client hanging up."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from gateway.edge.api import api_routes
from gateway.edge.edge import Edge
from gateway.edge.request import ApiRequest
from gateway.edge.responses import ApiResponse, json_response
from gateway.edge.routes import Route, RouteTable
from gateway.options import Options
from tests.gateway.fakes import (
    Answer,
    Client,
    FakeUpstream,
    Reply,
    Rig,
    account,
    anthropic_body,
    asgi_call,
    bearer,
    chat_answer,
    chat_body,
    chat_stream,
    chat_text,
    client_key,
    events,
    json_reply,
    provider,
    rig,
    run,
    snapshot,
    sse,
    sse_reply,
)

KEY = "gw-edge-key"


class Pages:
    """Django's pages, as far as the edge is concerned: whatever it is handed."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"<html>page</html>"})


def gateway(script: dict[str, Reply] | None = None, options: Options | None = None,
            **key_limits: Any) -> tuple[Edge, Rig, Pages]:
    prov = provider(served_models=["m-1"])
    r = rig(snapshot([prov], {KEY: client_key(KEY, **key_limits)}), [account(1, "sk-one")],
            FakeUpstream(script or {"sk-one": json_reply(chat_answer("hello"))}),
            options or Options(max_body_bytes=4096, keepalive_seconds=5.0, shutdown_grace=2.0))
    pages = Pages()
    return Edge(r.gw, pages, sockets=None), r, pages


async def post(edge: Edge, path: str, body: Any, **kwargs: Any) -> Answer:
    return await asgi_call(edge, "POST", path, orjson.dumps(body), bearer(KEY), **kwargs)


def openai_error(answer: Answer) -> dict[str, Any]:
    error: dict[str, Any] = answer.json()["error"]
    assert set(error) >= {"message", "type"}
    return error


def anthropic_error(answer: Answer) -> dict[str, Any]:
    body = answer.json()
    assert body["type"] == "error"
    error: dict[str, Any] = body["error"]
    return error


# ----------------------------------------------------------------- the route table


async def _view(gw: Any, request: ApiRequest, **params: str) -> ApiResponse:
    return json_response(params)


def test_a_route_matches_its_exact_path_and_a_pattern_passes_its_segments() -> None:
    table = RouteTable([Route("/v1/messages", _view, "anthropic"),
                        Route("/v1/files/{file_id}/content", _view, "responses", frozenset({"GET"}))])
    exact = table.match("/v1/messages")
    assert exact is not None and exact.route.pattern == "/v1/messages" and exact.params == {}
    found = table.match("/v1/files/file-42/content")
    assert found is not None and found.params == {"file_id": "file-42"}
    assert table.match("/v1/files//content") is None  # an empty segment is no id
    assert table.match("/v1/files/a/b/content") is None and table.match("/v1/messages/extra") is None


def test_a_rest_of_path_parameter_takes_every_segment_after_its_prefix() -> None:
    table = RouteTable([Route("/v1/models", _view, "openai_chat", frozenset({"GET"})),
                        Route("/v1/models/{model_id...}", _view, "openai_chat", frozenset({"GET"}))])
    plain = table.match("/v1/models/gpt-5")
    assert plain is not None and plain.params == {"model_id": "gpt-5"}
    nested = table.match("/v1/models/router/anthropic/claude-haiku-4-5")
    assert nested is not None and nested.params == {"model_id": "router/anthropic/claude-haiku-4-5"}
    listing = table.match("/v1/models")
    assert listing is not None and listing.params == {}
    assert table.match("/v1/models/a//b") is None  # an empty segment is no part of an id
    assert table.envelope("/v1/models/x") == "openai_chat"


def test_paths_under_v1_and_the_health_checks_are_the_apis_and_nothing_else_is() -> None:
    table = api_routes()
    assert all(table.is_api(p) for p in ("/v1/chat/completions", "/v1/anything/at/all", "/healthz", "/readyz"))
    assert not any(table.is_api(p) for p in ("/", "/admin/", "/dashboard/", "/v1", "/static/x.css"))


def test_an_unknown_path_answers_in_the_envelope_of_the_api_family_it_lies_under() -> None:
    table = api_routes()
    assert table.envelope("/v1/messages/batches") == "anthropic"
    assert table.envelope("/v1/responses/resp_1/cancel") == "responses"
    assert table.envelope("/v1/chat/completions/x") == "openai_chat"
    assert table.envelope("/v1/embeddings") == "openai_chat"  # OpenAI's shape is the default under /v1/
    assert table.envelope("/healthz") is None and table.envelope("/admin/") is None


# ----------------------------------------------------------------- through the edge


def test_an_unknown_messages_path_is_a_404_in_anthropics_envelope_with_cors() -> None:
    edge, r, _ = gateway()
    answer = run(lambda: post(edge, "/v1/messages/batches", {}))
    assert answer.status == 404 and anthropic_error(answer)["type"] == "not_found_error"
    assert answer.headers["access-control-allow-origin"] == "*"
    assert not r.upstream.calls


def test_a_wrong_method_is_a_405_naming_the_allowed_ones_in_the_paths_envelope() -> None:
    edge, _, _ = gateway()
    answer = run(lambda: asgi_call(edge, "GET", "/v1/chat/completions", headers=bearer(KEY)))
    assert answer.status == 405 and answer.headers["allow"] == "POST"
    assert openai_error(answer)["type"] == "invalid_request_error"
    messages = run(lambda: asgi_call(edge, "PUT", "/v1/messages", headers=bearer(KEY)))
    assert messages.status == 405 and anthropic_error(messages) and messages.headers["allow"] == "POST"


def test_a_preflight_is_answered_without_a_key_and_with_cors_headers() -> None:
    edge, _, _ = gateway()
    answer = run(lambda: asgi_call(edge, "OPTIONS", "/v1/messages",
                                   headers={"origin": "https://app.example", "access-control-request-method": "POST"}))
    assert answer.status == 200
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert "authorization" in answer.headers["access-control-allow-headers"].lower()


def test_pages_go_to_django_and_api_paths_never_do() -> None:
    edge, _, pages = gateway()
    page = run(lambda: asgi_call(edge, "GET", "/admin/login/"))
    api = run(lambda: asgi_call(edge, "GET", "/healthz"))
    assert page.body == b"<html>page</html>" and pages.paths == ["/admin/login/"]
    assert api.status == 200 and api.json() == {"status": "ok"}


def test_a_request_through_the_edge_is_translated_both_ways() -> None:
    edge, r, _ = gateway()
    answer = run(lambda: post(edge, "/v1/messages", anthropic_body()))
    assert answer.status == 200
    body = answer.json()
    assert body["type"] == "message" and body["content"][0]["text"] == "hello"
    assert r.upstream.calls[0].path == "/chat/completions" and r.upstream.calls[0].body["model"] == "m-1"
    assert len(r.log.records) == 1 and r.log.records[0].status == 200


# ----------------------------------------------------------------- the body limit


def test_a_declared_body_over_the_limit_is_refused_with_413_before_it_is_read() -> None:
    edge, r, _ = gateway()
    client = Client([b"x" * 1000] * 5)
    headers = {**bearer(KEY), "content-length": "5000"}
    answer = run(lambda: asgi_call(edge, "POST", "/v1/messages", headers=headers, client=client))
    assert answer.status == 413 and anthropic_error(answer)["type"] == "request_too_large"
    assert answer.headers["connection"] == "close"
    assert not r.upstream.calls and not r.log.records


def test_a_chunked_body_is_refused_once_it_passes_the_limit() -> None:
    edge, r, _ = gateway()
    client = Client([b"x" * 1500] * 4)
    answer = run(lambda: asgi_call(edge, "POST", "/v1/chat/completions", headers=bearer(KEY), client=client))
    assert answer.status == 413 and openai_error(answer)
    assert not r.upstream.calls


def test_a_chunked_body_under_the_limit_reaches_the_view_whole() -> None:
    edge, r, _ = gateway()
    raw = orjson.dumps(chat_body())
    parts = [raw[:5], raw[5:20], raw[20:]]
    answer = run(lambda: asgi_call(edge, "POST", "/v1/chat/completions", parts, bearer(KEY)))
    assert answer.status == 200 and r.upstream.calls[0].body["messages"] == chat_body()["messages"]


# ----------------------------------------------------------------- hanging up, stopping


def slow_stream(*texts: str, gap: float = 0.05) -> Reply:
    parts = chat_stream(*texts)
    body: list[bytes | float] = [sse(*parts[:2])]
    for part in parts[2:]:
        body += [gap, sse(part)]
    return Reply(200, body, {"content-type": "text/event-stream"})


def test_a_client_hanging_up_mid_stream_drops_the_upstream_and_keeps_the_log_row() -> None:
    edge, r, _ = gateway({"sk-one": sse_reply(*chat_stream("a")[:2], stall=True)})

    async def work() -> bool:
        client = Client(orjson.dumps(chat_body(stream=True)))
        call = asyncio.create_task(asgi_call(edge, "POST", "/v1/chat/completions", headers=bearer(KEY),
                                             client=client))
        while not r.upstream.calls:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        client.hang_up()
        done, _ = await asyncio.wait({call}, timeout=1.0)  # at once, not at the upstream's idle timeout
        call.cancel()
        return call in done

    assert run(work)
    response = r.upstream.calls[0].response
    assert response is not None and response.closed
    (record,) = r.log.records
    assert record.error_class == "client_disconnected"


def test_a_stopping_gateway_refuses_new_requests_keeps_liveness_and_lets_open_ones_finish() -> None:
    edge, r, _ = gateway({"sk-one": slow_stream("one", "two", "three")})

    async def work() -> tuple[Answer, Answer, Answer, Answer]:
        open_call = asyncio.create_task(post(edge, "/v1/chat/completions", chat_body(stream=True)))
        while not r.upstream.calls:
            await asyncio.sleep(0.005)
        stopping = asyncio.create_task(edge.drain.stop(grace=2.0))
        await asyncio.sleep(0)
        refused = await post(edge, "/v1/messages", anthropic_body())
        live = await asgi_call(edge, "GET", "/healthz")
        ready = await asgi_call(edge, "GET", "/readyz")
        finished = await asyncio.wait_for(open_call, 2.0)
        await asyncio.wait_for(stopping, 3.0)
        return refused, live, ready, finished

    refused, live, ready, finished = run(work)
    assert refused.status == 503 and anthropic_error(refused)["type"] == "overloaded_error"
    assert refused.headers["retry-after"] == "1"
    assert live.status == 200 and ready.status == 503 and ready.json()["status"] == "stopping"
    assert finished.status == 200 and chat_text(finished.body) == "onetwothree"
    assert finished.body.endswith(b"data: [DONE]\n\n") and b"error" not in finished.body
    assert len(r.upstream.calls) == 1 and r.pool.closed


def stopped_mid_stream(path: str, body: dict[str, Any]) -> tuple[Answer, Rig]:
    """A stream whose upstream goes silent, open when the gateway stops with a short grace."""

    edge, r, _ = gateway({"sk-one": sse_reply(*chat_stream("a")[:2], stall=True)})

    async def work() -> Answer:
        open_call = asyncio.create_task(post(edge, path, body))
        while not r.upstream.calls:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        await asyncio.wait_for(edge.drain.stop(grace=0.05), 3.0)
        return await asyncio.wait_for(open_call, 1.0)

    return run(work), r


def test_a_translated_stream_still_open_after_the_grace_ends_in_its_protocol_and_keeps_its_row() -> None:
    answer, r = stopped_mid_stream("/v1/messages", anthropic_body(stream=True))
    names = [name for name, _ in events(answer.body)]
    assert answer.status == 200 and names[-2:] == ["error", "message_stop"]
    error = [d for name, d in events(answer.body) if name == "error"][0]
    assert error["error"]["type"] == "overloaded_error"
    (record,) = r.log.records
    assert record.error_class == "shutting_down"


def test_a_passed_through_stream_still_open_after_the_grace_ends_with_an_error_and_done() -> None:
    answer, r = stopped_mid_stream("/v1/chat/completions", chat_body(stream=True))
    got = events(answer.body)
    assert got[-1] == (None, "[DONE]") and "shutting down" in got[-2][1]["error"]["message"]
    assert chat_text(answer.body) == "a"
    (record,) = r.log.records
    assert record.error_class == "shutting_down"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
def test_a_stopping_gateway_refuses_with_503_even_before_reading_the_key(path: str) -> None:
    edge, _, _ = gateway()

    async def work() -> Answer:
        await edge.drain.stop(grace=0.0)
        return await asgi_call(edge, "POST", path, b"{}", {})

    answer = run(work)
    assert answer.status == 503 and openai_error(answer)["type"] == "overloaded_error"


def test_a_database_out_of_reach_is_503_in_the_callers_envelope_never_500() -> None:
    edge, r, _ = gateway()
    r.pool.unavailable = True

    async def work() -> tuple[Answer, Answer]:
        return (await post(edge, "/v1/messages", anthropic_body()),
                await post(edge, "/v1/chat/completions", chat_body()))

    messages, chat = run(work)
    assert messages.status == 503 and anthropic_error(messages)["type"] == "overloaded_error"
    assert chat.status == 503 and "database" in openai_error(chat)["message"]
    assert messages.headers["Retry-After"] == "2"
    assert r.upstream.calls == []
