"""A message's content parts as Responses carries them: ``output_text`` (with ``annotations``
and ``logprobs``) and ``refusal``, both ways.

Annotations ⇄ IR citations: ``url_citation`` (indexes into the part's own text, as the IR
counts) is the one every protocol shares; ``file_citation``, ``container_file_citation`` and
``file_path`` are kept raw and shown only to a Responses client. Other protocols' document
citations have no Responses shape and are left out.
"""

from __future__ import annotations

from typing import Any

from .. import block_data, ir
from ..block_data import URL_CITATION
from . import items

ItemStatus = items.ItemStatus
# Annotation types of output_text other than url_citation (openai-python's response_output_text).
OWN_KINDS = frozenset({"file_citation", "container_file_citation", "file_path"})


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def citation_to_ir(annotation: Any) -> ir.JSON | None:
    if not isinstance(annotation, dict):
        return None
    kind = annotation.get("type")
    # file_citation and file_path point at one position (``index``), the others at a span.
    start = _int(annotation.get("start_index"), _int(annotation.get("index"), 0))
    end = _int(annotation.get("end_index"), start)
    if kind == URL_CITATION and isinstance(annotation.get("url"), str):
        title = annotation.get("title")
        return block_data.url_citation(annotation["url"], title if isinstance(title, str) else None,
                                      start, end, annotation)
    if kind in OWN_KINDS:
        return block_data.other_citation(kind, start, end, annotation)
    return None


def citation_to_wire(data: ir.JSON) -> ir.JSON | None:
    if data.get("type") == URL_CITATION and isinstance(data.get("url"), str):
        start, end = data.get("start_index"), data.get("end_index")
        start = start if isinstance(start, int) else 0
        return {"type": URL_CITATION, "url": data["url"], "title": data.get("title") or "",
                "start_index": start, "end_index": end if isinstance(end, int) else start}
    raw = data.get("raw")
    if data.get("type") in OWN_KINDS and isinstance(raw, dict):
        return raw
    return None


def logprobs_to_wire(tokens: list[ir.JSON]) -> list[ir.JSON]:
    """Responses requires ``bytes`` on every token (Chat allows null): the UTF-8 of the token."""

    def with_bytes(entry: ir.JSON) -> ir.JSON:
        raw = entry.get("bytes")
        token = entry.get("token") if isinstance(entry.get("token"), str) else ""
        return {"token": token, "logprob": entry.get("logprob", 0.0),
                "bytes": raw if isinstance(raw, list) else list(str(token).encode())}

    return [{**with_bytes(t), "top_logprobs": [with_bytes(x) for x in t.get("top_logprobs") or []]}
            for t in tokens]


def part(block: ir.Block) -> ir.JSON:
    """The content part of a text or refusal block."""

    if block.kind == "refusal":
        return refusal(block.text)
    notes = [n for n in map(citation_to_wire, block.citations) if n is not None]
    return output_text(block.text, notes, block.logprobs)


def output_text(text: str, annotations: list[ir.JSON] | None = None,
                logprobs: list[ir.JSON] | None = None) -> ir.JSON:
    out = items.output_text(text)
    out["annotations"] = annotations or []
    if logprobs:
        out["logprobs"] = logprobs_to_wire(logprobs)
    return out


def refusal(text: str) -> ir.JSON:
    return {"type": "refusal", "refusal": text}


def message(item_id: str, content: list[ir.JSON], status: ItemStatus = "completed") -> ir.JSON:
    return {**items.message(item_id, [], status), "content": content}


def blocks_of(item: dict[str, Any]) -> list[ir.Block]:
    """The IR blocks of a message item's content: one per text or refusal part."""

    content = item.get("content")
    blocks: list[ir.Block] = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "output_text" and isinstance(p.get("text"), str):
            notes = p.get("annotations")
            blocks.append(ir.Block(
                "text", text=p["text"],
                citations=[c for c in map(citation_to_ir, notes if isinstance(notes, list) else []) if c],
                logprobs=block_data.token_logprobs(p.get("logprobs"))))
        elif p.get("type") == "refusal" and isinstance(p.get("refusal"), str):
            blocks.append(ir.Block("refusal", text=p["refusal"]))
    return blocks
