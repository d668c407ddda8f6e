"""The IR's citation and token-logprob payloads (``BlockDelta.data``), shared by every protocol.

A citation is ``{"type", "url", "title", "cited_text", "start_index", "end_index", "raw"}``:
``type`` is ``"url_citation"`` for every citation of a web page (Anthropic
``web_search_result_location``, OpenAI ``url_citation``), else the source's own type name
(Anthropic ``char_location``/``page_location``/…, Responses ``file_citation``/…), which only a
client of that protocol can be shown. ``start_index``/``end_index`` count characters of the
*block's own* text (a Chat encoder adds the block's offset in ``content``); ``raw`` is the
source protocol's object, re-emitted verbatim to a client of the same protocol.

A token logprob is OpenAI's ``{"token", "logprob", "bytes", "top_logprobs": [{"token",
"logprob", "bytes"}]}`` (Chat and Responses share it). A ``logprobs`` delta *precedes* the
text delta it describes, so that an encoder can send them in one event.
"""

from __future__ import annotations

from typing import Any

from .ir import JSON

URL_CITATION = "url_citation"


def url_citation(url: str, title: str | None, start: int, end: int, raw: JSON,
                 cited_text: str | None = None) -> JSON:
    return {"type": URL_CITATION, "url": url, "title": title, "cited_text": cited_text,
            "start_index": start, "end_index": end, "raw": raw}


def other_citation(kind: str, start: int, end: int, raw: JSON, cited_text: str | None = None) -> JSON:
    return {"type": kind, "url": None, "title": None, "cited_text": cited_text,
            "start_index": start, "end_index": end, "raw": raw}


def span(data: JSON, text: str) -> tuple[int, int]:
    """The citation's character span, clamped to ``text``."""

    start, end = data.get("start_index"), data.get("end_index")
    start = start if isinstance(start, int) and 0 <= start <= len(text) else 0
    end = end if isinstance(end, int) and start <= end <= len(text) else len(text)
    return start, end


def _bytes(value: Any) -> list[int] | None:
    return value if isinstance(value, list) and all(isinstance(b, int) for b in value) else None


def token_logprobs(value: Any) -> list[JSON]:
    """A wire list of token logprobs (Chat or Responses) → the IR's entries; malformed ones are skipped."""

    if not isinstance(value, list):
        return []
    out: list[JSON] = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            continue
        logprob = entry.get("logprob")
        top = entry.get("top_logprobs")
        out.append({
            "token": entry["token"],
            "logprob": float(logprob) if isinstance(logprob, (int, float)) else 0.0,
            "bytes": _bytes(entry.get("bytes")),
            "top_logprobs": [
                {"token": t["token"], "logprob": float(t.get("logprob") or 0.0), "bytes": _bytes(t.get("bytes"))}
                for t in (top if isinstance(top, list) else [])
                if isinstance(t, dict) and isinstance(t.get("token"), str)
            ],
        })
    return out
