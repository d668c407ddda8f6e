"""Same protocol on both sides: what the upstream sends reaches the client as it was sent.

The scripted upstream is handed real providers' recorded answers (``/_mock/replay``),
so the bytes under test were never produced by the gateway's own encoders: citations,
annotations, logprobs, refusals, web-search progress events, the upstream's ids and
its error bodies all have to come through untouched.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.e2e.test_streams import PATHS, body_for
from tests.fixtures.recorded_loader import Recording, recordings
from tests.servers import Server
from translation.sse import SSEEvent, SSEParser

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"authorization": f"Bearer {CLIENT_KEY}"}
# The protocol's own end of a complete answer, as its API documents it.
TERMINAL = {"anthropic": {"message_stop"}, "responses": {"response.completed", "response.incomplete",
                                                         "response.failed"}}


def replay(mock: Server, model: str, body: bytes, *, status: int = 200, stream: bool = True,
           headers: dict[str, str] | None = None) -> None:
    httpx.post(mock.url + "/_mock/replay", json={
        "model": model, "status": status, "body": body.decode(), "headers": headers or {},
        "content_type": "text/event-stream" if stream else "application/json"}).raise_for_status()


def parse(data: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    return parser.feed(data) + parser.finish()


def complete(rec: Recording, events: list[SSEEvent]) -> bool:
    """The recording ends as its protocol says a whole answer ends (judged from the bytes alone)."""

    if rec.protocol == "openai_chat":
        return bool(events) and events[-1].data.strip() == "[DONE]"
    names = {e.event or "" for e in events}
    return bool(names & TERMINAL[rec.protocol]) and not any(e.event == "error" for e in events)


STREAMS = [r for r in recordings(stream=True) if r.status == 200]
JSON_BODIES = [r for r in recordings(stream=False) if r.status == 200]


def post_raw(gateway: Server, proto: str, model: str, stream: bool) -> httpx.Response:
    body = body_for(proto, model)
    body["stream"] = stream
    return httpx.post(gateway.url + PATHS[proto], json=body, headers=HEADERS, timeout=30)


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name)
def test_a_recorded_stream_reaches_a_client_of_its_protocol_event_for_event(
        pool: Any, gateway: Server, mock_upstream: Server, rec: Recording) -> None:
    model = "replay-stream"
    replay(mock_upstream, model, rec.body)
    sent = parse(rec.body)
    received = parse(post_raw(gateway, rec.protocol, f"up-{rec.protocol}/{model}", stream=True).content)
    sent_pairs = [(e.event, e.data) for e in sent]
    got_pairs = [(e.event, e.data) for e in received]
    if complete(rec, sent):
        assert got_pairs == sent_pairs
    else:
        # What the upstream sent (up to where it broke) comes first and unchanged; the gateway may
        # only add the protocol's ending after it.
        forwarded = got_pairs[:len(sent_pairs)]
        assert forwarded == sent_pairs[:len(forwarded)]
        assert len(got_pairs) - len(forwarded) <= 8


@pytest.mark.parametrize("rec", JSON_BODIES, ids=lambda r: r.name)
def test_a_recorded_json_answer_reaches_a_client_of_its_protocol_byte_for_byte(
        pool: Any, gateway: Server, mock_upstream: Server, rec: Recording) -> None:
    model = "replay-json"
    replay(mock_upstream, model, rec.body, stream=False)
    resp = post_raw(gateway, rec.protocol, f"up-{rec.protocol}/{model}", stream=False)
    assert resp.status_code == 200, resp.text
    assert resp.content == rec.body


def _recording(suffix: str) -> Recording:
    return next(r for r in recordings() if r.name.endswith(suffix))


def test_anthropic_citations_and_server_tool_usage_reach_the_sdk(pool: Any, gateway: Server,
                                                                 mock_upstream: Server) -> None:
    rec = _recording("anthropic-web-search-tool.1.chunks.txt")
    replay(mock_upstream, "replay-cite", rec.body)
    client = clients.anthropic_client(gateway.url, CLIENT_KEY)
    with client.messages.stream(model="up-anthropic/replay-cite", max_tokens=100,
                                messages=[{"role": "user", "content": "search"}]) as stream:
        final = stream.get_final_message()
    cited = [c for block in final.content if block.type == "text" for c in (block.citations or [])]
    assert cited and all(c.type == "web_search_result_location" and c.url for c in cited)
    assert final.usage.server_tool_use is not None and final.usage.server_tool_use.web_search_requests >= 1
    start = json.loads(next(e for e in parse(rec.body) if e.event == "message_start").data)
    assert final.id == start["message"]["id"]


def test_responses_annotations_and_the_upstream_response_id_reach_the_sdk(pool: Any, gateway: Server,
                                                                          mock_upstream: Server) -> None:
    rec = _recording("openai-web-search-tool.1.chunks.txt")
    sent = parse(rec.body)
    replay(mock_upstream, "replay-annotated", rec.body)
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    with client.responses.stream(model="up-responses/replay-annotated", input="search") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.output_text.annotation.added" in kinds
    assert any(k.startswith("response.web_search_call.") for k in kinds)
    annotations = [a for item in final.output if item.type == "message" for part in item.content
                   if part.type == "output_text" for a in part.annotations]
    assert annotations and all(a.type == "url_citation" and a.url for a in annotations)
    upstream_id = json.loads(next(e for e in sent if e.event == "response.created").data)["response"]["id"]
    assert final.id == upstream_id and upstream_id.startswith("resp_")


def test_chat_logprobs_refusal_and_several_choices_pass_through(pool: Any, gateway: Server,
                                                                mock_upstream: Server) -> None:
    answer = {
        "id": "chatcmpl-upstream-1", "object": "chat.completion", "created": 1_700_000_000, "model": "replay-n",
        "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": "Hi", "refusal": None},
             "logprobs": {"content": [{"token": "Hi", "logprob": -0.01, "bytes": [72, 105], "top_logprobs": []}],
                          "refusal": None}},
            {"index": 1, "finish_reason": "stop",
             "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
             "logprobs": None},
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    replay(mock_upstream, "replay-n", json.dumps(answer).encode(), stream=False)
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    completion = client.chat.completions.create(model="up-openai_chat/replay-n", n=2, logprobs=True,
                                                messages=[{"role": "user", "content": "hi"}])
    assert completion.id == "chatcmpl-upstream-1"
    assert len(completion.choices) == 2
    first, second = completion.choices
    assert first.logprobs is not None and first.logprobs.content is not None
    assert first.logprobs.content[0].token == "Hi"
    assert second.message.refusal == "I can't help with that." and second.message.content is None


@pytest.mark.parametrize("proto", ["openai_chat", "responses"])
def test_an_upstream_error_keeps_its_status_type_code_and_param(pool: Any, gateway: Server, mock_upstream: Server,
                                                                proto: str) -> None:
    error = (b'{"error": {"message": "This model\'s maximum context length is 8192 tokens.", '
             b'"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}')
    replay(mock_upstream, "replay-too-long", error, status=400, stream=False)
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    with pytest.raises(openai.BadRequestError) as caught:
        if proto == "openai_chat":
            client.chat.completions.create(model="up-openai_chat/replay-too-long",
                                           messages=[{"role": "user", "content": "hi"}])
        else:
            client.responses.create(model="up-responses/replay-too-long", input="hi")
    assert caught.value.status_code == 400
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.param == "messages"
    assert caught.value.type == "invalid_request_error"
    assert caught.value.response.content == error


def test_an_anthropic_error_body_reaches_the_sdk_as_sent(pool: Any, gateway: Server, mock_upstream: Server) -> None:
    error = (b'{"type":"error","error":{"type":"invalid_request_error",'
             b'"message":"prompt is too long: 210000 tokens > 200000 maximum"},"request_id":"req_011upstream"}')
    replay(mock_upstream, "replay-anthropic-400", error, status=400, stream=False)
    client = clients.anthropic_client(gateway.url, CLIENT_KEY)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="up-anthropic/replay-anthropic-400", max_tokens=10,
                               messages=[{"role": "user", "content": "hi"}])
    assert caught.value.response.content == error
    assert "prompt is too long" in str(caught.value)


@pytest.mark.parametrize("proto", ["openai_chat", "anthropic", "responses"])
def test_an_alias_shows_the_client_the_model_it_asked_for_in_json_and_streams(
        pool: Any, gateway: Server, proto: str) -> None:
    """The one rewrite: the model name the gateway sent is reported back as the name the client used."""

    model = f"up-{proto}/mock-text"
    resp = post_raw(gateway, proto, model, stream=False)
    assert resp.status_code == 200
    body = resp.json()
    reported = body["model"]
    assert reported == model
    events = parse(post_raw(gateway, proto, model, stream=True).content)
    datas = [e.data for e in events if e.data.strip() != "[DONE]"]
    assert any(model in d for d in datas)
    assert not any('"model":"mock-text"' in d for d in datas)


def test_claude_code_connection_probe_is_answered(gateway: Server) -> None:
    assert httpx.head(gateway.url + "/").status_code == 200
    assert httpx.get(gateway.url + "/", follow_redirects=False).headers["location"] == "/dashboard/"
