"""Every recorded Responses upstream, and our hand-made transcripts, through the decoder."""

import json
import os

import pytest

from tests.fixtures.recorded_loader import ROOT, recordings
from tests.translation.responses.helpers import (
    HAND_MADE, check_ir_stream, decode, encode, hand_made, parsed_bodies, validate_wire,
)
from translation import ir, responses
from translation.fold import fold
from translation.protocol import EncodeContext
from translation.responses import items

STREAMS = [r for r in recordings(protocol="responses", stream=True) if r.body]
R = ir.FinishReason
PYD = "pydantic-ai/tests/models/cassettes/test_openai_responses/"
VERCEL = "vercel-ai/packages/openai/src/responses/__fixtures__/"


def replay(suffix: str) -> ir.Response:
    matches = [r for r in STREAMS if r.name.endswith(suffix)]
    assert len(matches) == 1, suffix
    events = decode(matches[0].body)
    check_ir_stream(events)
    return fold(events)


def tool_calls(resp: ir.Response):
    return [(b.id, b.name, json.loads(b.text)) for b in resp.blocks if b.kind == "tool_call"]


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name.split("/")[-1])
def test_every_recorded_stream_decodes_to_a_well_formed_ir_stream(rec):
    events = decode(rec.body)
    check_ir_stream(events)


def test_the_corpus_is_the_one_we_expect():
    assert len(STREAMS) >= 45
    # The shared loader reads only response.body.string; these cassettes recorded JSON
    # answers as parsed_body, so they arrive empty (see the report) and are read below.
    empty = {r.name.split("/")[-1] for r in recordings(protocol="responses") if not r.body}
    assert empty <= {"test_openai_responses_model_http_error.yaml#0",
                     "test_openai_responses_model_web_search_tool_stream.yaml#1",
                     "test_openai_responses_thinking_with_modified_history.yaml#0",
                     "test_openai_responses_thinking_with_modified_history.yaml#1",
                     "test_openai_responses_thinking_with_modified_history.yaml#2"}


# ------------------------------------------------------------------ facts from specific recordings


def test_openai_reasoning_with_encrypted_content_then_function_call():
    resp = replay("openai-reasoning-encrypted-content.1.chunks.txt#0")
    assert resp.id == "resp_01830d662ab3856501693c321345c88190b0de00f3b9975691"
    assert resp.model == "gpt-5.1-codex-max"
    reasoning = resp.blocks[0]
    assert reasoning.id == "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
    assert reasoning.text.startswith("**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7")
    assert reasoning.signature.startswith("gAAAAABpPDIVOKrsHNZ0GwsoEKA_IG") and len(reasoning.signature) == 1060
    assert tool_calls(resp) == [("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"})]
    assert resp.finish == ir.Finish(R.TOOL_CALLS, raw="completed")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (134, 28)


def test_later_steps_of_the_multi_response_recording():
    assert tool_calls(replay("openai-reasoning-encrypted-content.1.chunks.txt#1"))[0][1] == "calculator"
    last = replay("openai-reasoning-encrypted-content.1.chunks.txt#3")
    assert last.finish.reason == R.STOP and last.usage.input_tokens == 299


def test_four_summary_parts_are_joined_with_blank_lines():
    rec = next(r for r in STREAMS if r.name.endswith("test_openai_responses_thinking_part_iter.yaml#0"))
    done = [json.loads(line[6:]) for line in rec.body.decode().splitlines()
            if line.startswith("data: ") and '"response.output_item.done"' in line]
    summaries = [p["text"] for p in done[0]["item"]["summary"]]
    assert len(summaries) == 4
    resp = replay("test_openai_responses_thinking_part_iter.yaml#0")
    assert resp.blocks[0].text == "\n\n".join(summaries)
    assert resp.blocks[0].signature == done[0]["item"]["encrypted_content"]
    assert resp.usage == ir.Usage(input_tokens=13, output_tokens=1680, cached_tokens=0, reasoning_tokens=1408)


def test_github_copilot_rotating_ids_are_correlated_by_output_index():
    resp = replay("github-copilot-id-rotation.1.chunks.txt")
    assert resp.id == "capture-id-1" and resp.model == "gpt-5.3-codex"
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert resp.blocks[0].text == "**Counting character occurrences**"
    assert resp.blocks[1].text.startswith("There are **3** letter **“r”**s in **“strawberry.”**")
    assert resp.blocks[1].text.endswith("positions **3, 8, and 9**.")
    assert resp.usage.reasoning_tokens == 44


def test_deepseek_uuid_ids_and_raw_reasoning_text():
    resp = replay("test_deepseek_responses[function_tool_stream].yaml#0")
    assert resp.id == "1235b7ba-fdc9-4a1c-bfe4-6137c207baf3"
    assert resp.blocks[0].text == "The user asks about temperature in Tokyo. I'll call the tool."
    assert tool_calls(resp) == [("call_00_xjY8Z2BvSlzgEmmw0DtH0464", "get_temperature", {"city": "Tokyo"})]
    assert resp.usage.cached_tokens == 256
    text = replay("test_deepseek_responses[text_stream].yaml#0")
    assert [(b.kind, b.text) for b in text.blocks] == [
        ("reasoning", "We need answer capital of France."), ("text", "The capital of France is Paris.")]


def test_lm_studio_arguments_only_in_done_event():
    resp = replay("lmstudio-tool-call.1.chunks.txt")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text", "tool_call"]
    assert resp.blocks[1].text == "I'll get the current weather information for San Francisco for you."
    assert tool_calls(resp) == [("call_2025306790300011", "weather", {"location": "San Francisco"})]
    assert resp.usage.cached_tokens == 2


def test_openrouter_raw_cot_interleaved_items_and_trailing_done_marker():
    resp = replay("test_openai_responses_raw_cot_stream_openrouter.yaml#0")
    assert resp.id == "gen-1764265411-Fu1iEX7h5MRWiL79lb94"
    assert [(b.kind, b.text) for b in resp.blocks] == [
        ("reasoning", 'The user asks: "What is 2+2?" They expect a straightforward answer: 4. Just answer 4.'),
        ("text", "4")]
    assert resp.finish.reason == R.STOP


def test_plain_function_call_and_background_queued_event():
    assert tool_calls(replay("test_openai_responses_stream.yaml#0")) == [
        ("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"})]
    assert tool_calls(replay("azure-tool-call.1.chunks.txt")) == [
        ("call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", {"location": "San Francisco"})]
    queued = replay("test_background_mode_streaming_vcr.yaml#0")
    assert queued.blocks[0].text == "2 + 2 equals 4."


def test_reasoning_with_empty_summary_keeps_its_signature():
    resp = replay("test_openai_responses_streaming_usage.yaml#0")
    assert resp.blocks[0].text == "" and len(resp.blocks[0].signature) == 3896
    assert tool_calls(resp) == [("call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666})]
    assert resp.usage.reasoning_tokens == 448


def test_builtin_items_become_server_tool_blocks():
    search = replay("openai-tool-search.1.chunks.txt")
    assert [(b.kind, b.name) for b in search.blocks] == [
        ("server_tool", "tool_search_call"), ("server_tool", "tool_search_output"), ("tool_call", "get_weather")]
    assert search.blocks[0].raw["type"] == "tool_search_call" and search.blocks[0].raw_protocol == "responses"
    custom = replay("openai-custom-tool.1.chunks.txt")
    assert custom.blocks[0].raw["type"] == "custom_tool_call" and custom.finish.reason == R.STOP
    web = replay("openai-web-search-tool.1.chunks.txt")
    assert sum(b.name == "web_search_call" for b in web.blocks) == 6


def test_two_message_items_with_phases_are_two_text_blocks():
    resp = replay("openai-phase.1.chunks.txt")
    assert [b.kind for b in resp.blocks] == ["text", "text"]
    assert resp.blocks[1].text.startswith("Here are a few **AI headlines for today")


def test_insufficient_quota_error_then_failed_is_one_429():
    resp = replay("openai-error.1.chunks.txt")
    assert resp.blocks == [] and resp.finish is None
    assert resp.error.status == 429 and resp.error.code == "insufficient_quota"
    assert resp.error.message.startswith("You exceeded your current quota")


def test_truncated_json_in_synthetic_recording_is_malformed():
    resp = replay("parallel-tool-call-wrapper.1.chunks.txt")
    assert resp.error.error_type == "malformed_upstream" and resp.error.status == 502


# ------------------------------------------------------------------ non-streamed bodies and errors


def test_every_recorded_json_body_parses():
    bodies = [r for r in recordings(protocol="responses", stream=False) if r.status < 400 and r.body]
    assert len(bodies) >= 2
    for rec in bodies:
        resp = responses.parse_response(rec.body)
        assert resp.finish is not None and resp.blocks


@pytest.mark.parametrize("relative, status, message, code", [
    (PYD + "test_openai_responses_model_http_error.yaml", 400,
     "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead.",
     "decimal_below_min_value"),
    (PYD + "test_openai_responses_thinking_with_modified_history.yaml", 400,
     "Item 'rs_68c42de022c881948db7ed1cc2529f2e0202c9ad459e0d23' of type 'reasoning' was provided without "
     "its required following item.", None),
])
def test_recorded_error_bodies(relative, status, message, code):
    errors = [(s, b) for s, b in parsed_bodies(relative) if s >= 400]
    err = responses.parse_error(errors[0][0], errors[0][1])
    assert (err.status, err.message, err.code, err.error_type) == (status, message, code, "invalid_request_error")


@pytest.mark.parametrize("name, status, etype", [
    ("openai-error.1.json", 429, "insufficient_quota"),
    ("reasoning-model-temperature-error.json", 400, "invalid_request_error"),
])
def test_recorded_error_files(name, status, etype):
    err = responses.parse_error(status, (ROOT / VERCEL / name).read_bytes())
    assert err.status == status and err.error_type == etype and err.message


# ------------------------------------------------------------------ hand-made transcripts


def hand(name: str) -> tuple[list[ir.Event], ir.Response]:
    wire = hand_made(name)
    assert wire.startswith(b": hand-made")
    events = decode(wire)
    check_ir_stream(events)
    return events, fold(events)


def test_hand_made_incomplete_max_output_tokens():
    events, resp = hand("incomplete_max_output_tokens.sse")
    assert resp.blocks[0].text == "The three primary colours of light are red,"
    assert resp.finish == ir.Finish(R.LENGTH, raw="max_output_tokens")
    assert resp.usage.output_tokens == 16


def test_hand_made_reasoning_then_text():
    _, resp = hand("reasoning_then_text.sse")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert resp.blocks[0].text == "**Adding numbers**\n\nTwo plus two is four.\n\n**Answer**\n\nSay 4."
    assert resp.blocks[0].signature == "gAAAAABhandmade-encrypted-02=="
    assert resp.blocks[0].id == "rs_hm02"
    assert resp.blocks[1].text == "2 + 2 = 4."


def test_hand_made_text_then_tool():
    _, resp = hand("text_then_tool.sse")
    assert resp.blocks[0].text == "Let me check the weather."
    assert tool_calls(resp) == [("call_hm03", "get_weather", {"city": "Paris"})]
    assert resp.finish.reason == R.TOOL_CALLS


def test_hand_made_tool_then_text_then_reasoning():
    _, resp = hand("tool_then_text_then_reasoning.sse")
    assert [b.kind for b in resp.blocks] == ["tool_call", "text", "reasoning"]
    assert resp.blocks[2].signature == "gAAAAABhandmade-encrypted-04=="
    assert resp.usage.cached_tokens == 64


def test_hand_made_two_parallel_function_calls():
    _, resp = hand("parallel_function_calls.sse")
    assert tool_calls(resp) == [("call_hm05a", "get_weather", {"city": "Rome"}),
                                ("call_hm05b", "get_time", {"tz": "Europe/Rome"})]


def test_hand_made_truncated_stream():
    events, resp = hand("truncated.sse")
    assert resp.blocks[0].text == "Once upon"
    assert resp.error.error_type == "upstream_truncated"
    assert events[-2:] == [ir.BlockStop(0), resp.error]


def test_hand_made_error_event_then_failed():
    _, resp = hand("error_then_failed.sse")
    assert resp.blocks[0].text == "Partial"
    assert resp.error == ir.Error(message="Rate limit reached for gpt-5-mini on tokens per min (TPM).",
                                  error_type="rate_limit_exceeded", status=429, code="rate_limit_exceeded")


@pytest.mark.parametrize("rec", [r for r in recordings(protocol="responses") if r.status >= 400],
                         ids=lambda r: r.name.split("/")[-1])
def test_recorded_error_statuses_go_through_parse_error(rec):
    err = responses.parse_error(rec.status, rec.body)
    assert err.status == rec.status and err.message


# ------------------------------------------------------------------ decoder → encoder golden output

EXPECTED = HAND_MADE / "expected"
HAND_MADE_FILES = sorted(p.name for p in HAND_MADE.glob("*.sse"))


@pytest.mark.parametrize("name", HAND_MADE_FILES)
def test_hand_made_transcript_reencodes_to_the_expected_wire(name, monkeypatch):
    """Upstream transcript → decoder → encoder, compared byte for byte with the stored
    client transcript (ids made deterministic). UPDATE_GOLDEN=1 rewrites the files."""
    counter = iter(range(1, 1000))
    monkeypatch.setattr(items, "new_id", lambda prefix: f"{prefix}{next(counter):04d}")
    ctx = EncodeContext(model="gpt-5-mini", id="resp_golden", created=1763474589,
                        body={"model": "gpt-5-mini", "input": "hi", "stream": True, "max_output_tokens": 16})
    wire = encode(decode(hand_made(name)), ctx)
    validate_wire(wire)
    header = f": expected client transcript for ../{name}, produced by decoder + encoder\n\n".encode()
    path = EXPECTED / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_bytes(header + wire)
    assert path.read_bytes() == header + wire
