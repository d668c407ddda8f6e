"""Chat ``annotations`` (``message.annotations``, a stream delta's ``annotations``) ⇄ IR citations.

Chat has one slot: ``{"type": "url_citation", "url_citation": {"url", "title", "start_index",
"end_index"}}`` with indexes into the whole ``content``; the IR counts from its text block's
start, so both directions take that block's ``offset`` in ``content``. Other citation kinds
(document locations, file citations) have no Chat shape and are left out.
"""

from __future__ import annotations

from typing import Any

from ..block_data import URL_CITATION, url_citation
from ..ir import JSON


def to_ir(annotation: Any, offset: int) -> JSON | None:
    if not isinstance(annotation, dict) or annotation.get("type") != URL_CITATION:
        return None
    body = annotation.get(URL_CITATION)
    if not isinstance(body, dict) or not isinstance(body.get("url"), str):
        return None
    start, end = body.get("start_index"), body.get("end_index")
    start = max(start - offset, 0) if isinstance(start, int) else 0
    end = max(end - offset, start) if isinstance(end, int) else start
    title = body.get("title")
    return url_citation(body["url"], title if isinstance(title, str) else None, start, end, annotation)


def to_wire(data: JSON, offset: int) -> JSON | None:
    if data.get("type") != URL_CITATION or not isinstance(data.get("url"), str):
        return None
    start, end = data.get("start_index"), data.get("end_index")
    start = start if isinstance(start, int) else 0
    end = end if isinstance(end, int) else start
    return {"type": URL_CITATION, URL_CITATION: {
        "url": data["url"], "title": data.get("title") or "",
        "start_index": offset + start, "end_index": offset + end}}
