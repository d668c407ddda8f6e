"""What a client ends up with, in one comparable shape.

Each protocol's test package provides ``sdk_readback.py`` with
``summary_from_stream(wire: bytes) -> Summary`` and
``summary_from_json(body: dict) -> Summary`` built ONLY from what the official
SDK's own parser and accumulator produced; :func:`summary_of` computes the same
shape from the IR the stream was encoded from, so the two can be compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from translation import ir


@dataclass
class Summary:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, parsed args)
    finish: ir.FinishReason | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    signatures: list[str] = field(default_factory=list)
    error: str | None = None
    refusal: str = ""  # refusal messages (Chat ``refusal``, Responses refusal parts)
    citations: list[tuple[str, str]] = field(default_factory=list)  # (IR citation type, url or "")
    logprobs: list[str] = field(default_factory=list)  # the tokens of the text's logprobs


# The citation types each client protocol can show (IR types: a web page is "url_citation").
CITATION_TYPES = {
    "openai_chat": {"url_citation"},
    "responses": {"url_citation", "file_citation", "container_file_citation", "file_path"},
    "anthropic": {"url_citation", "char_location", "page_location", "content_block_location",
                  "search_result_location"},
}


def carried_by(client: str, s: Summary) -> Summary:
    """What a client of ``client``'s protocol can be shown of refusals, citations and logprobs:
    Anthropic shows a refusal message as its ``stop_details.explanation`` and has no logprobs; citations of a kind the
    protocol cannot name are left out. A REFUSAL finish reads as the refusal message plus a
    plain stop in the OpenAI protocols, and as a content filter when there is no message."""

    s = replace(s, citations=[c for c in s.citations if c[0] in CITATION_TYPES[client]])
    if client == "anthropic":
        # A content filter and a refusal are one stop reason there: "refusal".
        finish = ir.FinishReason.REFUSAL if s.finish is ir.FinishReason.CONTENT_FILTER else s.finish
        return replace(s, logprobs=[], finish=finish)
    if s.finish is ir.FinishReason.REFUSAL:
        s.finish = ir.FinishReason.STOP if s.refusal else ir.FinishReason.CONTENT_FILTER
    return s


def parse_args(text: str) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def summary_of(resp: ir.Response) -> Summary:
    s = Summary()
    for b in resp.blocks:
        if b.kind == "text":
            s.text += b.text
            s.citations.extend((c["type"], c.get("url") or "") for c in b.citations)
            s.logprobs.extend(t["token"] for t in b.logprobs)
        elif b.kind == "refusal":
            s.refusal += b.text
        elif b.kind == "reasoning":
            s.reasoning += b.text
            if b.signature:
                s.signatures.append(b.signature)
        elif b.kind == "tool_call":
            s.tool_calls.append((b.id or "", b.name or "", parse_args(b.text)))
    s.finish = resp.finish.reason if resp.finish else None
    u = resp.usage
    s.input_tokens, s.output_tokens = u.input_tokens, u.output_tokens
    s.cached_tokens, s.reasoning_tokens = u.cached_tokens, u.reasoning_tokens
    if resp.error is not None:
        s.error = resp.error.message
    return s
