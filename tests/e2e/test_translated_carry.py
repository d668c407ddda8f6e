"""Between different protocols, what the target protocol can carry arrives; what it cannot is refused by name.

Requests are checked at the scripted upstream (what it received); answers are real
providers' recordings replayed by it (``/_mock/replay``) and read back with the
official SDKs.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
import openai
import pytest

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.e2e.test_passthrough import replay
from tests.fixtures.recorded_loader import recordings
from tests.servers import Server, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
# A one-page PDF, enough for a document block.
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]"
                       b"/Count 1>>endobj\n3 0 obj<</Type/Page/Parent 2 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF").decode()


def sent(mock: Server) -> dict[str, Any]:
    body: dict[str, Any] = received(mock)[-1]["body"]
    return body


# ----------------------------------------------------------------- requests


def test_chat_structured_output_reaches_a_responses_upstream_as_text_format(pool: Any, gateway: Server,
                                                                            mock_upstream: Server) -> None:
    clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
        model="up-responses/mock-text", messages=[{"role": "user", "content": "where?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}})
    fmt = sent(mock_upstream)["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "place" and fmt["schema"] == SCHEMA


def test_responses_structured_output_reaches_chat_and_anthropic_upstreams(pool: Any, gateway: Server,
                                                                          mock_upstream: Server) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    text = {"format": {"type": "json_schema", "name": "place", "schema": SCHEMA, "strict": True}}
    client.responses.create(model="up-openai_chat/mock-text", input="where?", text=text)  # type: ignore[arg-type]
    rf = sent(mock_upstream)["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == SCHEMA
    client.responses.create(model="up-anthropic/mock-text", input="where?", text=text)  # type: ignore[arg-type]
    assert sent(mock_upstream)["output_config"]["format"]["schema"] == SCHEMA


def test_a_provider_without_structured_output_does_not_get_it(transactional_db: Any, gateway: Server,
                                                               mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, accepts_structured_output=False))
    seen(gateway)
    text = {"format": {"type": "json_schema", "name": "place", "schema": SCHEMA, "strict": True}}
    clients.openai_client(gateway.url, CLIENT_KEY).responses.create(
        model="up-anthropic/mock-text", input="where?", text=text)  # type: ignore[arg-type]
    body = sent(mock_upstream)
    assert "format" not in body.get("output_config", {}) and "output_format" not in body


@pytest.mark.parametrize("upstream", ["openai_chat", "responses"])
def test_an_anthropic_pdf_document_reaches_openai_upstreams_as_a_file(pool: Any, gateway: Server,
                                                                     mock_upstream: Server, upstream: str) -> None:
    clients.anthropic_client(gateway.url, CLIENT_KEY).messages.create(
        model=f"up-{upstream}/mock-text", max_tokens=50, messages=[{"role": "user", "content": [
            {"type": "document", "title": "report.pdf",
             "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
            {"type": "text", "text": "Summarise the report."}]}])
    body = json.dumps(sent(mock_upstream))
    assert PDF in body, "the PDF never reached the upstream"
    assert ('"file_data"' in body) and ('"type": "file"' in body or '"type": "input_file"' in body)


@pytest.mark.parametrize("upstream", ["openai_chat", "responses"])
def test_an_unknown_block_is_refused_by_name_not_dropped(pool: Any, gateway: Server, mock_upstream: Server,
                                                         upstream: str) -> None:
    before = len(received(mock_upstream))
    with pytest.raises(anthropic.BadRequestError) as caught:
        clients.anthropic_client(gateway.url, CLIENT_KEY).messages.create(
            model=f"up-{upstream}/mock-text", max_tokens=50,
            messages=[{"role": "user", "content": [{"type": "bogus", "data": 1}, {"type": "text", "text": "hi"}]}])
    assert "bogus" in str(caught.value) and "messages[0].content[0]" in str(caught.value)
    assert len(received(mock_upstream)) == before, "a refused request must not reach the upstream"


def test_an_unknown_block_rides_along_untouched_to_an_upstream_of_its_own_protocol(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    block = {"type": "search_result", "source": "https://example.com", "title": "t",
             "content": [{"type": "text", "text": "found"}]}
    clients.anthropic_client(gateway.url, CLIENT_KEY).messages.create(
        model="up-anthropic/mock-text", max_tokens=50,
        messages=[{"role": "user", "content": [block, {"type": "text", "text": "hi"}]}])
    assert sent(mock_upstream)["messages"][0]["content"][0] == block


def test_chat_logprobs_request_reaches_a_responses_upstream(pool: Any, gateway: Server,
                                                            mock_upstream: Server) -> None:
    clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
        model="up-responses/mock-text", messages=[{"role": "user", "content": "hi"}], logprobs=True, top_logprobs=2)
    body = sent(mock_upstream)
    assert "message.output_text.logprobs" in body["include"] and body["top_logprobs"] == 2


def test_logprobs_cannot_be_had_from_an_anthropic_upstream(pool: Any, gateway: Server) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
            model="up-anthropic/mock-text", messages=[{"role": "user", "content": "hi"}], logprobs=True)
    assert caught.value.param == "logprobs"


# ----------------------------------------------------------------- answers


def _rec(suffix: str) -> bytes:
    return next(r for r in recordings() if r.name.endswith(suffix)).body


def test_anthropic_citations_reach_a_responses_client_as_url_citations(pool: Any, gateway: Server,
                                                                       mock_upstream: Server) -> None:
    replay(mock_upstream, "cite-to-responses", _rec("anthropic-web-search-tool.1.chunks.txt"))
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    with client.responses.stream(model="up-anthropic/cite-to-responses", input="search") as stream:
        final = stream.get_final_response()
    annotations = [a for item in final.output if item.type == "message" for part in item.content
                   if part.type == "output_text" for a in part.annotations]
    assert annotations and all(a.type == "url_citation" and a.url.startswith("http") for a in annotations)


def test_anthropic_citations_reach_a_chat_client_as_annotations(pool: Any, gateway: Server,
                                                                mock_upstream: Server) -> None:
    replay(mock_upstream, "cite-to-chat", _rec("anthropic-web-search-tool.1.json"), stream=False)
    completion = clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
        model="up-anthropic/cite-to-chat", messages=[{"role": "user", "content": "search"}])
    annotations = completion.choices[0].message.annotations or []
    assert annotations and all(a.type == "url_citation" and a.url_citation.url for a in annotations)


def test_a_chat_refusal_reaches_a_responses_client_as_a_refusal_part(pool: Any, gateway: Server,
                                                                     mock_upstream: Server) -> None:
    answer = {"id": "chatcmpl-r", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                           "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}
    replay(mock_upstream, "refuse-to-responses", json.dumps(answer).encode(), stream=False)
    resp = clients.openai_client(gateway.url, CLIENT_KEY).responses.create(
        model="up-openai_chat/refuse-to-responses", input="something bad")
    parts = [p for item in resp.output if item.type == "message" for p in item.content]
    assert [p.type for p in parts] == ["refusal"] and parts[0].refusal == "I can't help with that."  # type: ignore[union-attr]


def test_an_anthropic_refusal_reaches_a_chat_client_as_a_refusal(pool: Any, gateway: Server,
                                                                 mock_upstream: Server) -> None:
    replay(mock_upstream, "refuse-to-chat", _rec("anthropic-refusal.json"), stream=False)
    completion = clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
        model="up-anthropic/refuse-to-chat", messages=[{"role": "user", "content": "something bad"}])
    choice = completion.choices[0]
    assert choice.finish_reason == "content_filter" or choice.message.refusal is not None


def test_chat_logprobs_reach_a_responses_client(pool: Any, gateway: Server, mock_upstream: Server) -> None:
    answer = {"id": "chatcmpl-l", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"},
                           "logprobs": {"content": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105],
                                                     "top_logprobs": []}]}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    replay(mock_upstream, "logprobs-to-responses", json.dumps(answer).encode(), stream=False)
    resp = clients.openai_client(gateway.url, CLIENT_KEY).responses.create(
        model="up-openai_chat/logprobs-to-responses", input="hi",
        include=["message.output_text.logprobs"])
    text = next(p for item in resp.output if item.type == "message" for p in item.content if p.type == "output_text")
    assert text.logprobs and text.logprobs[0].token == "Hi" and text.logprobs[0].logprob == -0.25  # type: ignore[union-attr]


@pytest.mark.parametrize("client_proto", ["anthropic", "responses"])
def test_an_upstream_error_code_and_param_reach_a_client_of_another_protocol(
        pool: Any, gateway: Server, mock_upstream: Server, client_proto: str) -> None:
    error = {"error": {"message": "maximum context length is 8192 tokens", "type": "invalid_request_error",
                       "param": "messages", "code": "context_length_exceeded"}}
    replay(mock_upstream, "too-long", json.dumps(error).encode(), status=400, stream=False)
    if client_proto == "responses":
        with pytest.raises(openai.BadRequestError) as caught:
            clients.openai_client(gateway.url, CLIENT_KEY).responses.create(model="up-openai_chat/too-long",
                                                                           input="hi")
        assert caught.value.code == "context_length_exceeded" and caught.value.param == "messages"
    else:
        with pytest.raises(anthropic.BadRequestError) as caught_a:
            clients.anthropic_client(gateway.url, CLIENT_KEY).messages.create(
                model="up-openai_chat/too-long", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert "maximum context length" in str(caught_a.value)
