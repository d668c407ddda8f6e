"""Anthropic text-block ``citations`` ⇄ IR citations.

An Anthropic citation supports its whole text block, so in the IR it spans the block
(``start_index`` 0 to the block's length). ``web_search_result_location`` is a web page: it
becomes a ``url_citation`` every protocol can show. Document locations (``char_location``,
``page_location``, ``content_block_location``) and ``search_result_location`` point into the
request's own documents and search results, which the OpenAI protocols cannot name: they
stay Anthropic-only (kept raw). A url citation from an OpenAI upstream becomes a
``web_search_result_location`` whose ``cited_text`` is the span of the block it covered and
whose ``encrypted_index`` is empty: there is no Anthropic search result behind it to point at.
"""

from __future__ import annotations

from typing import Any

from .. import block_data
from ..block_data import URL_CITATION
from ..ir import JSON

WEB = "web_search_result_location"
KINDS = frozenset({"char_location", "page_location", "content_block_location", "search_result_location", WEB})


def to_ir(citation: Any, text_len: int) -> JSON | None:
    if not isinstance(citation, dict) or citation.get("type") not in KINDS:
        return None
    cited = citation.get("cited_text") if isinstance(citation.get("cited_text"), str) else None
    if citation["type"] == WEB and isinstance(citation.get("url"), str):
        title = citation.get("title")
        return block_data.url_citation(citation["url"], title if isinstance(title, str) else None,
                                      0, text_len, citation, cited)
    return block_data.other_citation(citation["type"], 0, text_len, citation, cited)


def to_wire(data: JSON, block_text: str) -> JSON | None:
    raw = data.get("raw")
    if isinstance(raw, dict) and raw.get("type") in KINDS:
        return raw
    if data.get("type") != URL_CITATION or not isinstance(data.get("url"), str):
        return None  # another protocol's file citation: no Anthropic shape
    start, end = block_data.span(data, block_text)
    cited = data.get("cited_text")
    return {"type": WEB, "cited_text": cited if isinstance(cited, str) else block_text[start:end],
            "url": data["url"], "title": data.get("title"), "encrypted_index": ""}


def from_wire_list(value: Any, text_len: int) -> list[JSON]:
    return [c for c in (to_ir(v, text_len) for v in (value if isinstance(value, list) else [])) if c is not None]
