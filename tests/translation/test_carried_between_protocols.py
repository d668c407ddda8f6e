"""Recorded refusals, citations, logprobs and error codes, through a decoder of one protocol
and the encoder of another, read by that client's official SDK.

The expected values are read from the upstream bytes by the upstream protocol's own SDK (or
straight from the recording), never from the package under test.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.fixtures.recorded_loader import Recording, recordings
from tests.translation.anthropic.sdk_readback import final_message
from tests.translation.openai_chat.sdk_readback import final_completion
from tests.translation.responses.sdk_readback import final_response
from translation import ir, registry
from translation.fold import fold
from translation.protocol import EncodeContext
from translation.sse import SSEParser


def recorded(fragment: str) -> Recording:
    [rec] = [r for r in recordings(stream=True) if fragment in r.name]
    return rec


def decode(rec: Recording) -> list[ir.Event]:
    decoder = registry.get(rec.protocol).stream_decoder()
    parser = SSEParser()
    events = [e for sse_event in parser.feed(rec.body) + parser.finish() for e in decoder.feed(sse_event)]
    return events + decoder.finish()


def translated(fragment: str, client: str) -> bytes:
    encoder = registry.get(client).stream_encoder(EncodeContext(model="client-model", id="fixed-id"))
    out = [b for event in decode(recorded(fragment)) for b in encoder.feed(event)]
    return b"".join(out + encoder.finish())


def wire_payloads(wire: bytes) -> list[dict[str, Any]]:
    parser = SSEParser()
    return [json.loads(e.data) for e in parser.feed(wire) + parser.finish() if e.data.strip() != "[DONE]"]


def rendered(fragment: str, client: str) -> dict[str, Any]:
    resp = fold(decode(recorded(fragment)))
    return registry.get(client).render_response(resp, EncodeContext(model="client-model", id="fixed-id"))


# ------------------------------------------------------------ citations

OPENAI_SEARCH = "openai-web-search-tool.1.chunks"
ANTHROPIC_SEARCH = "vercel-ai/packages/anthropic/src/__fixtures__/anthropic-web-search-tool.1.chunks"


def responses_citations(response: Any) -> list[tuple[str, str]]:
    """(url, the text it covers) of every url_citation, as a Responses client reads them."""

    return [(a.url, part.text[a.start_index:a.end_index])
            for item in response.output if item.type == "message"
            for part in item.content if part.type == "output_text"
            for a in part.annotations if a.type == "url_citation"]


def chat_citations(completion: Any) -> list[tuple[str, str]]:
    message = completion.choices[0].message
    return [(a.url_citation.url, message.content[a.url_citation.start_index:a.url_citation.end_index])
            for a in message.annotations or []]


def anthropic_citations(message: Any) -> list[tuple[str, str]]:
    """(url, text of the block it supports): an Anthropic citation spans its whole block."""

    return [(c.url, block.text) for block in message.content if block.type == "text"
            for c in block.citations or [] if c.type == "web_search_result_location"]


def test_responses_url_citations_reach_a_chat_client_covering_the_same_text() -> None:
    want = responses_citations(final_response(recorded(OPENAI_SEARCH).body, validate=False))
    assert len(want) >= 4
    assert chat_citations(final_completion(translated(OPENAI_SEARCH, "openai_chat"))) == want
    body = rendered(OPENAI_SEARCH, "openai_chat")
    assert chat_citations(openai.types.chat.ChatCompletion.model_validate(body)) == want


def test_responses_url_citations_reach_an_anthropic_client_quoting_what_they_cover() -> None:
    want = responses_citations(final_response(recorded(OPENAI_SEARCH).body, validate=False))
    message = final_message(translated(OPENAI_SEARCH, "anthropic"))
    got = [(c.url, c.cited_text) for block in message.content if block.type == "text"
           for c in block.citations or []]
    assert got == want


def test_anthropic_web_search_citations_reach_openai_clients_spanning_their_block() -> None:
    want = anthropic_citations(final_message(recorded(ANTHROPIC_SEARCH).body))
    assert len(want) >= 4
    assert responses_citations(final_response(translated(ANTHROPIC_SEARCH, "responses"))) == want
    assert chat_citations(final_completion(translated(ANTHROPIC_SEARCH, "openai_chat"))) == want


# ------------------------------------------------------------ logprobs

CHAT_LOGPROBS = "83b060bae42eb41c4f1edbb7c1542b954b37d9dfd1910b964ddebc9677e6ae85"
RESPONSES_LOGPROBS = "test_openai_instructions_with_responses_logprobs_streaming"


def test_chat_logprobs_reach_a_responses_client_on_its_output_text() -> None:
    upstream = final_completion(recorded(CHAT_LOGPROBS).body).choices[0].logprobs.content
    want = [(t.token, t.logprob) for t in upstream]
    response = final_response(translated(CHAT_LOGPROBS, "responses"))
    [part] = response.output[0].content
    assert [(t.token, t.logprob) for t in part.logprobs] == want and want


def test_responses_logprobs_reach_a_chat_client() -> None:
    # From the deltas: the finished part of this recording rounds some logprobs (-0.0).
    want = [(t["token"], t["logprob"]) for e in wire_payloads(recorded(RESPONSES_LOGPROBS).body)
            if e["type"] == "response.output_text.delta" for t in e["logprobs"]]
    assert len(want) > 3
    logprobs = final_completion(translated(RESPONSES_LOGPROBS, "openai_chat")).choices[0].logprobs
    assert [(t.token, t.logprob) for t in logprobs.content] == want


# ------------------------------------------------------------ refusals

CHAT_REFUSAL = "173417d553406f034f643e5db3f8d591fb691ebac56f5ae39a22cc7d455c5353"
ANTHROPIC_REFUSAL = "anthropic-refusal.chunks"


def test_a_chat_refusal_is_a_refusal_part_for_responses_and_stop_details_for_anthropic() -> None:
    upstream = final_completion(recorded(CHAT_REFUSAL).body).choices[0].message
    assert upstream.refusal and not upstream.content
    response = final_response(translated(CHAT_REFUSAL, "responses"))
    assert response.status == "completed"
    assert [(p.type, p.refusal) for p in response.output[0].content] == [("refusal", upstream.refusal)]
    message = final_message(translated(CHAT_REFUSAL, "anthropic"))
    assert message.stop_reason == "refusal" and message.stop_details.explanation == upstream.refusal


def test_an_anthropic_refusal_explanation_reaches_the_openai_refusal_slots() -> None:
    upstream = final_message(recorded(ANTHROPIC_REFUSAL).body)
    explanation = upstream.stop_details.explanation
    assert upstream.stop_reason == "refusal" and explanation
    choice = final_completion(translated(ANTHROPIC_REFUSAL, "openai_chat")).choices[0]
    assert (choice.message.refusal, choice.message.content, choice.finish_reason) == (explanation, "", "stop")
    response = final_response(translated(ANTHROPIC_REFUSAL, "responses"))
    assert [(p.type, p.refusal) for p in response.output[0].content] == [("refusal", explanation)]
    body = rendered(ANTHROPIC_REFUSAL, "openai_chat")
    assert (body["choices"][0]["message"]["refusal"], body["choices"][0]["message"]["content"]) == (explanation, None)


# ------------------------------------------------------------ error codes

def test_a_responses_error_code_reaches_a_chat_client() -> None:
    [failed] = [e for e in wire_payloads(recorded("openai-error.1").body) if e["type"] == "response.failed"]
    with pytest.raises(openai.APIError) as raised:
        final_completion(translated("openai-error.1", "openai_chat"))
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["code"] == failed["response"]["error"]["code"] == "insufficient_quota"


def test_a_chat_stream_error_code_reaches_a_responses_client() -> None:
    response = final_response(translated("test_tool_use_failed_error_streaming.yaml#0", "responses"))
    assert response.status == "failed" and response.error.code == "tool_use_failed"
