"""The count_tokens estimate against a real tokenizer (Claude's public one), kind by kind, within 25 %.

Each case measures what a piece of content adds to a Messages body: the
estimate of the body with it minus the estimate without it, against the real
token count of that content. Media add Anthropic's documented image cost.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import time
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.limits import tokens
from gateway.limits.tokens import estimate_input_tokens
from tests.tokenizer import claude
from tests.tokenizer import samples as S

TOLERANCE = 0.25
# A PDF page is read as an image of the page at the size cap (Anthropic's PDF and vision docs):
# 1,600 tokens, which a scanned page measured on the API matches (1,592–1,600).
PAGE_IMAGE = 1600


def body(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": content}], **extra}


def added(content: Any) -> int:
    return estimate_input_tokens(body(content)) - estimate_input_tokens(body(""))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _texts() -> dict[str, str]:
    rng = random.Random(20261123)
    return {
        "english prose": S.prose(rng, 300),
        "python code": S.code(rng, 30),
        "javascript code": S.js_code(rng, 30),
        "chinese": S.chinese(rng, 200),
        "japanese": S.japanese(rng, 300),
    }


TEXTS = _texts()


@pytest.fixture(scope="module")
def real_counts() -> dict[str, int]:
    return dict(zip(TEXTS, claude.count(list(TEXTS.values()))))


def within(estimate: float, real: int) -> None:
    ratio = estimate / real
    print(f"estimate {estimate} / real {real} = {ratio:.3f}")
    assert 1 - TOLERANCE <= ratio <= 1 + TOLERANCE, f"estimate {estimate} is {ratio:.2f}× the real {real}"


@pytest.mark.parametrize("kind", list(TEXTS))
def test_text_estimate_is_within_a_quarter_of_the_real_count(kind: str, real_counts: dict[str, int]) -> None:
    within(added(TEXTS[kind]), real_counts[kind])


def test_six_thousand_chinese_characters_count_about_one_token_each() -> None:
    text = (TEXTS["chinese"] * 3)[:6000]
    [real] = claude.count([text])
    assert real > 4500  # the old four-characters-a-token rule said 1,500
    within(added(text), real)


def test_json_tool_schemas_are_within_a_quarter_of_the_real_count() -> None:
    tools = S.tool_schemas(random.Random(7), 25)
    [real] = claude.count(["".join(compact(t) for t in tools)])
    with_tools = estimate_input_tokens(body("hi", tools=tools)) - estimate_input_tokens(body("hi"))
    # Beside the definitions, tools bring the documented tool-use system prompt.
    within(with_tools - tokens.TOOLS_PROMPT_TOKENS["auto"], real)


def test_tool_use_and_results_count_their_json_and_text() -> None:
    calls = [{"path": f"/src/{w}.py", "line": i, "pattern": w * 3} for i, w in enumerate(S.WORDS[:60])]
    result = S.code(random.Random(3), 10)
    content = [{"type": "tool_use", "id": f"toolu_{i}", "name": "grep", "input": c} for i, c in enumerate(calls)]
    results = [{"type": "tool_result", "tool_use_id": "toolu_0", "content": [{"type": "text", "text": result}]}]
    real = sum(claude.count(["grep" + compact(c) for c in calls] + [result]))
    base = estimate_input_tokens({"model": "m", "messages": [{"role": "user", "content": "go"}]})
    est = estimate_input_tokens({"model": "m", "messages": [
        {"role": "user", "content": "go"}, {"role": "assistant", "content": content},
        {"role": "user", "content": results}]}) - base
    within(est, real)


def test_a_text_document_of_31000_characters_is_counted_in_full() -> None:
    doc = S.document(random.Random(11), 60)[:31000]
    [real] = claude.count([doc])
    est = added([{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": doc}},
                 {"type": "text", "text": "Summarise this."}]) - added("Summarise this.")
    assert est > 5000  # it was 2
    within(est, real)


@pytest.mark.parametrize("kerned", [False, True], ids=["Tj strings", "kerned TJ arrays"])
def test_pdf_pages_cost_a_page_image_plus_their_text(kerned: bool) -> None:
    rng = random.Random(5)
    prose = S.prose(rng, 400).replace("\n", " ")
    lines = [prose[i:i + 95] for i in range(0, len(prose), 95)]
    pages = [lines[i:i + 48] for i in range(0, 48 * 4, 48)]
    data = base64.b64encode(S.pdf(pages, kerned)).decode()
    [text_real] = claude.count(["\n".join("\n".join(p) for p in pages)])
    est = added([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}])
    within(est, len(pages) * PAGE_IMAGE + text_real)


def test_a_pdf_without_text_costs_its_page_images() -> None:
    data = base64.b64encode(S.pdf([[], [], []])).decode()
    est = added([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}])
    assert est == 3 * PAGE_IMAGE


def png(width: int, height: int) -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = zlib.compress(b"".join(b"\x00" + b"\x00" * width for _ in range(height)))
    raw = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
    return base64.b64encode(raw).decode()


def image(data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


@pytest.mark.parametrize(("width", "height", "expected"), [
    (200, 200, 54),          # 40,000 / 750 = 53.3
    (1000, 1000, 1334),      # 1,000,000 / 750 = 1,333.3
    (1092, 1092, 1590),      # the documented largest square that is not scaled
    (4032, 3024, 1600),      # a phone photo: scaled down to about 1.2 megapixels
    (3000, 500, 546),        # long edge scaled to 1,568: 1568 × 261 / 750 = 545.7
])
def test_images_cost_their_pixels_over_750_after_downscaling(width: int, height: int, expected: int) -> None:
    est = added([image(png(width, height))])
    assert abs(est - expected) <= 2


def test_an_image_by_url_is_counted_at_the_size_cap() -> None:
    est = added([{"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}])
    assert est == 1600


def test_thinking_of_earlier_turns_is_not_counted_but_the_current_turns_is() -> None:
    thought = S.prose(random.Random(1), 40)
    think = {"type": "thinking", "thinking": thought, "signature": "sig"}
    use = {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}
    result = [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]
    earlier = estimate_input_tokens({"model": "m", "messages": [
        {"role": "user", "content": "list"}, {"role": "assistant", "content": [think, use]},
        {"role": "user", "content": result}, {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"}]})
    without = estimate_input_tokens({"model": "m", "messages": [
        {"role": "user", "content": "list"}, {"role": "assistant", "content": [use]},
        {"role": "user", "content": result}, {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"}]})
    assert earlier == without
    current = estimate_input_tokens({"model": "m", "messages": [
        {"role": "user", "content": "list"}, {"role": "assistant", "content": [think, use]},
        {"role": "user", "content": result}]})
    assert current - without > 400


def test_a_megabyte_of_text_is_estimated_in_well_under_half_a_second() -> None:
    text = (TEXTS["english prose"] + TEXTS["python code"] + TEXTS["chinese"]) * 20
    big = body([{"type": "text", "text": text[i:i + 5000]} for i in range(0, len(text), 5000)])
    assert len(text.encode()) > 1_000_000
    started = time.perf_counter()
    estimate_input_tokens(big)
    assert time.perf_counter() - started < 0.5  # about 40 ms on the 2-core dev machine


# What a body parsed by the gateway can hold: orjson reads integers of 64 bits at most.
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False)
                    | st.text(max_size=20)
                    | st.sampled_from(["text", "image", "document", "tool_use", "tool_result", "thinking",
                                       "base64", "url", "content", "type", "source", "data"]),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["type", "text", "source", "data", "content", "input", "name", "role",
                                         "messages", "system", "tools", "tool_choice", "title", "x"]),
                        inner, max_size=5),
                    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["messages", "system", "tools", "tool_choice", "model"]), JSON))
def test_any_json_body_gets_a_positive_estimate_without_error(body: dict[str, Any]) -> None:
    assert estimate_input_tokens(body) >= 1
