"""A non-streamed response is the fold of the stream, and unfold streams it back: refusals,
citations and logprobs included, so that the JSON paths carry them too."""

from translation import ir
from translation.fold import fold, unfold

TOKENS = [{"token": "A", "logprob": -0.1, "bytes": [65], "top_logprobs": []},
          {"token": " fact", "logprob": -0.2, "bytes": None, "top_logprobs": []}]
CITE = {"type": "url_citation", "url": "https://e.x/", "title": "E", "cited_text": None, "start_index": 2,
        "end_index": 6, "raw": {"type": "url_citation"}}

STREAM: list[ir.Event] = [
    ir.MessageStart(id="r", model="m"),
    ir.BlockStart(0, "text"),
    ir.BlockDelta(0, "logprobs", "", data={"content": TOKENS[:1]}), ir.BlockDelta(0, "text", "A"),
    ir.BlockDelta(0, "logprobs", "", data={"content": TOKENS[1:]}), ir.BlockDelta(0, "text", " fact"),
    ir.BlockDelta(0, "citation", "", data=CITE), ir.BlockStop(0),
    ir.BlockStart(1, "refusal", raw={"type": "refusal", "category": None}, raw_protocol="anthropic"),
    ir.BlockDelta(1, "refusal", "I won't"), ir.BlockDelta(1, "refusal", " go on."), ir.BlockStop(1),
    ir.Usage(input_tokens=3, output_tokens=4), ir.Finish(ir.FinishReason.REFUSAL, raw="refusal"),
]


def test_fold_gathers_refusal_text_citations_and_logprobs_on_their_blocks() -> None:
    text, refusal = fold(STREAM).blocks
    assert (text.kind, text.text, text.citations, text.logprobs) == ("text", "A fact", [CITE], TOKENS)
    assert (refusal.kind, refusal.text, refusal.raw_protocol) == ("refusal", "I won't go on.", "anthropic")


def test_unfold_streams_logprobs_before_their_text_and_citations_after_it() -> None:
    events = unfold(fold(STREAM))
    deltas = [(e.index, e.kind) for e in events if isinstance(e, ir.BlockDelta)]
    assert deltas == [(0, "logprobs"), (0, "text"), (0, "citation"), (1, "refusal")]
    assert fold(events) == fold(STREAM)
