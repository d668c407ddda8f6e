"""Every recorded Anthropic upstream through SSEParser → decoder, with spot checks of
facts read from specific recordings; error recordings through parse_error."""

import json

import pytest

from tests.fixtures.recorded_loader import Recording
from translation import anthropic, fold, ir

from .helpers import check_ir_stream, decode, decode_with, recordings

STREAMS = recordings(stream=True)
ERRORS = [r for r in recordings() if r.status >= 400]
R = ir.FinishReason


def by_suffix(suffix: str) -> Recording:
    [rec] = [r for r in STREAMS if r.name.endswith(suffix)]
    return rec


def folded(suffix: str) -> ir.Response:
    return fold.fold(decode(by_suffix(suffix).body))


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name[-70:])
def test_every_recorded_stream_decodes_to_a_well_formed_ir_stream(rec: Recording) -> None:
    events, decoder = decode_with(rec.body)
    check_ir_stream(events)
    assert decoder.unknown_events == 0
    outcome = [e for e in events if isinstance(e, (ir.Finish, ir.Error))][0]
    if "#0" in rec.name and ("duplicate-message-start" in rec.name or "spliced-message-start" in rec.name):
        assert isinstance(outcome, ir.Error)  # the loader cut these before their end
    else:
        assert isinstance(outcome, ir.Finish), outcome


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name[-70:])
def test_every_recorded_stream_decodes_the_same_in_small_chunks(rec: Recording) -> None:
    assert decode(rec.body, chunk=97) == decode(rec.body)


def test_every_recording_has_a_body() -> None:
    assert all(r.body for r in recordings())


# ----------------------------------------------------------------- spot checks


def test_basic_text_stream() -> None:
    resp = folded("basic_response.txt")
    assert [b.text for b in resp.blocks] == ["Hello there!"]
    assert resp.id == "msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK" and resp.model == "claude-3-opus-latest"
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (11, 6)
    assert resp.finish == ir.Finish(R.STOP, raw="end_turn")


def test_text_then_tool_use() -> None:
    resp = folded("lib/streaming/fixtures/tool_use_response.txt")
    assert resp.blocks[0].text == "I'll check the current weather in Paris for you."
    tool = resp.blocks[1]
    assert (tool.id, tool.name, json.loads(tool.text)) == ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather",
                                                           {"location": "Paris"})
    assert resp.finish is not None and resp.finish.reason == R.TOOL_CALLS
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (377, 65)


def test_first_input_json_delta_empty() -> None:
    events = decode(by_suffix("anthropic-json-tool.1.chunks.txt").body)
    assert not any(isinstance(e, ir.BlockDelta) and e.text == "" for e in events)
    tool = fold.fold(events).blocks[0]
    assert (tool.id, tool.name) == ("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json")
    assert json.loads(tool.text) == {"elements": [{"location": "San Francisco", "temperature": 58,
                                                   "condition": "sunny"}]}


def test_tool_without_arguments() -> None:
    resp = folded("anthropic-tool-no-args.chunks.txt")
    assert (resp.blocks[1].name, resp.blocks[1].text) == ("updateIssueList", "")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (565, 48)


def test_tool_use_with_caller_field() -> None:
    resp = folded("555fb399-a54c-455b-9ac5-2c9673f18e12.json#0")
    [tool] = resp.blocks
    assert (tool.id, tool.name) == ("toolu_018acGYLtfR52q9yDbWaEdQZ", "get_weather")
    assert json.loads(tool.text) == {"location": "San Francisco, CA", "units": "f"}
    assert resp.model == "claude-haiku-4-5-20251001"


def test_thinking_with_signature_then_text() -> None:
    resp = folded("test_anthropic_model_thinking_part_stream.yaml#0")
    thinking, text = resp.blocks
    assert thinking.kind == "reasoning" and thinking.text.startswith("This is a straightforward question about pedestrian")
    assert thinking.signature is not None and thinking.signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK/0rF")
    assert text.text.startswith("Here are the basic steps for safely crossing the street:")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (43, 282)


def test_clear_thinking_recording() -> None:
    resp = folded("anthropic-clear-thinking.1.chunks.txt")
    assert resp.blocks[0].text == "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"
    assert resp.blocks[1].text == "925 ÷ 5 = 185"


def test_two_redacted_thinking_blocks_then_text() -> None:
    resp = folded("test_anthropic_model_thinking_part_redacted_stream.yaml#0")
    assert [b.kind for b in resp.blocks] == ["reasoning", "reasoning", "text"]
    assert resp.blocks[0].redacted is not None and resp.blocks[0].redacted.startswith("EqkECkYIBxgCKkA8AZ4n")
    assert resp.blocks[1].redacted is not None and resp.blocks[1].redacted.startswith("EtgBCkYIBxgCKkDQfGkw")
    assert resp.blocks[2].text.startswith("I notice that you've sent what appears to be some kind of test string")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (92, 189)


def test_pause_turn_and_its_continuation() -> None:
    paused = folded("test_pause_turn_web_search_streaming_vcr.yaml#0")
    assert paused.finish == ir.Finish(R.PAUSE, raw="pause_turn")
    queries = [b.raw["input"]["query"] for b in paused.blocks
               if b.kind == "server_tool" and b.raw and b.raw["type"] == "server_tool_use"]
    assert queries[:2] == ["San Francisco weather today", "San Francisco sunrise time today"]
    assert paused.usage.input_tokens == 404500
    resumed = folded("test_pause_turn_web_search_streaming_vcr.yaml#1")
    assert resumed.finish is not None and resumed.finish.reason == R.STOP and resumed.usage.input_tokens == 482529


def test_refusals() -> None:
    resp = folded("anthropic-refusal.chunks.txt")
    assert resp.finish == ir.Finish(R.REFUSAL, raw="refusal")
    [refusal] = resp.blocks  # the stop_details explanation, for clients with a refusal slot
    assert refusal.kind == "refusal" and refusal.text.startswith("This request triggered restrictions on violative")
    assert refusal.raw is not None and refusal.raw["category"] == "cyber" and refusal.raw_protocol == "anthropic"
    text_then_refusal = folded("fable-fallback/stream-a-refusal.sse")
    assert text_then_refusal.finish == ir.Finish(R.REFUSAL, raw="refusal")
    assert "refusal" not in [b.kind for b in text_then_refusal.blocks]  # explanation: null


def test_server_blocks_of_every_kind_keep_their_raw_shape() -> None:
    kinds: set[str] = set()
    for suffix in ("anthropic-code-execution-20250825.1.chunks.txt", "anthropic-mcp.1.chunks.txt",
                   "anthropic-web-fetch-tool.1.chunks.txt", "anthropic-tool-search-regex.1.chunks.txt#0",
                   "test_anthropic_web_search_tool_stream.yaml#0"):
        kinds |= {b.raw["type"] for b in folded(suffix).blocks if b.kind == "server_tool" and b.raw}
    assert kinds == {"server_tool_use", "text_editor_code_execution_tool_result", "bash_code_execution_tool_result",
                     "mcp_tool_use", "mcp_tool_result", "web_fetch_tool_result", "tool_search_tool_result",
                     "web_search_tool_result"}
    code = folded("anthropic-code-execution-20250825.1.chunks.txt")
    uses = [b.raw for b in code.blocks if b.raw and b.raw["type"] == "server_tool_use"]
    assert uses[1] is not None and uses[1]["input"] == {"command": "python /tmp/fibonacci.py"}
    mcp = folded("anthropic-mcp.1.chunks.txt").blocks[0].raw
    assert mcp is not None and mcp["input"] == {"message": "hello world"}


def test_usage_with_cache_fields() -> None:
    resp = folded("anthropic-text.chunks.txt")
    # The recording's usage carries cache_creation {ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0}.
    assert resp.usage == ir.Usage(input_tokens=12, output_tokens=30, cached_tokens=0, cache_creation_tokens=0,
                                  cache_creation_1h_tokens=0)
    assert resp.blocks[0].text.startswith("Hello! I'm doing well, thank you for asking.")


def test_tool_search_then_client_tool() -> None:
    resp = folded("anthropic-tool-search-regex.1.chunks.txt#0")
    [tool] = [b for b in resp.blocks if b.kind == "tool_call"]
    assert (tool.id, tool.name, json.loads(tool.text)) == ("toolu_01UmPwkecewaEpMupy2ywk8b", "get_temp_data",
                                                           {"location": "San Francisco, CA"})


def test_incomplete_tool_json_closed_at_message_delta() -> None:
    events = decode(by_suffix("incomplete_partial_json_response.txt").body)
    check_ir_stream(events)
    resp = fold.fold(events)
    assert resp.finish == ir.Finish(R.LENGTH, raw="max_tokens")
    assert resp.blocks[1].text.endswith('\n"Filing taxes') and resp.blocks[1].name == "make_file"


# ----------------------------------------------------------------- error recordings


@pytest.mark.parametrize("rec", ERRORS, ids=lambda r: r.name[-70:])
def test_every_error_recording_goes_through_parse_error(rec: Recording) -> None:
    err = anthropic.parse_error(rec.status, rec.body)
    assert err.status == rec.status and err.message


def test_rate_limit_error_recording() -> None:
    [rec, _] = [r for r in ERRORS if r.status == 429]
    err = anthropic.parse_error(rec.status, rec.body)
    assert err.error_type == "rate_limit_error"
    assert err.message.startswith("This request would exceed your organization's rate limit of 20,000,000 prompt")


def test_not_found_and_invalid_request_cassettes() -> None:
    [not_found] = [r for r in ERRORS if r.name.endswith("test_anthropic_count_tokens_error.yaml#0")]
    err = anthropic.parse_error(not_found.status, not_found.body)
    assert (err.status, err.error_type) == (404, "not_found_error")
    assert err.message == json.loads(not_found.body)["error"]["message"]
    [invalid] = [r for r in ERRORS if r.name.endswith("xhigh_unsupported_model_errors.yaml#0")]
    err = anthropic.parse_error(invalid.status, invalid.body)
    assert (err.status, err.error_type) == (400, "invalid_request_error")
    assert err.message == json.loads(invalid.body)["error"]["message"]
