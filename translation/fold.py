"""A non-streaming response is the fold of the same IR events a stream carries."""

from __future__ import annotations

from collections.abc import Iterable

from . import ir


class Folder:
    """Accumulates IR events into an :class:`ir.Response`."""

    def __init__(self) -> None:
        self.response = ir.Response()
        self._open: dict[int, ir.Block] = {}
        self._text: dict[int, list[str]] = {}  # joined once at the block's stop: deltas can be many

    def feed(self, event: ir.Event) -> None:
        resp = self.response
        match event:
            case ir.MessageStart():
                resp.id = resp.id or event.id
                resp.model = resp.model or event.model
                if event.usage is not None:
                    resp.usage = resp.usage.merge(event.usage)
            case ir.BlockStart():
                started = ir.Block(kind=event.kind, id=event.id, name=event.name,
                                   raw=event.raw, raw_protocol=event.raw_protocol)
                self._open[event.index] = started
                self._text[event.index] = []
                resp.blocks.append(started)
            case ir.BlockDelta():
                open_block = self._open.get(event.index)
                if open_block is None:
                    return
                if event.kind == "signature":
                    open_block.signature = (open_block.signature or "") + event.text
                elif event.kind == "redacted":
                    open_block.redacted = (open_block.redacted or "") + event.text
                elif event.kind == "citation":
                    if event.data is not None:
                        open_block.citations.append(event.data)
                elif event.kind == "logprobs":
                    tokens = (event.data or {}).get("content")
                    open_block.logprobs.extend(tokens if isinstance(tokens, list) else [])
                else:
                    self._text[event.index].append(event.text)
            case ir.BlockStop():
                self._close(event.index)
            case ir.Usage():
                resp.usage = resp.usage.merge(event)
            case ir.Finish():
                resp.finish = event
            case ir.Error():
                resp.error = event

    def _close(self, index: int) -> None:
        block = self._open.pop(index, None)
        if block is not None:
            block.text += "".join(self._text.pop(index))

    def result(self) -> ir.Response:
        """The response so far, with blocks still open (a cut-off stream) included as they are."""

        for index in list(self._open):
            self._close(index)
        return self.response


def fold(events: Iterable[ir.Event]) -> ir.Response:
    folder = Folder()
    for event in events:
        folder.feed(event)
    return folder.result()


# The delta kind that carries the text of each block kind.
_TEXT_DELTA: dict[ir.BlockKind, ir.DeltaKind] = {
    "text": "text", "reasoning": "reasoning", "tool_call": "arguments", "server_tool": "text", "refusal": "refusal",
}


def unfold(resp: ir.Response) -> list[ir.Event]:
    """The event sequence a stream of ``resp`` would have carried."""

    events: list[ir.Event] = [ir.MessageStart(id=resp.id, model=resp.model)]
    for index, block in enumerate(resp.blocks):
        events.append(ir.BlockStart(index=index, kind=block.kind, id=block.id, name=block.name,
                                    raw=block.raw, raw_protocol=block.raw_protocol))
        if block.redacted is not None:
            events.append(ir.BlockDelta(index=index, kind="redacted", text=block.redacted))
        if block.logprobs:  # before the text they describe
            events.append(ir.BlockDelta(index=index, kind="logprobs", text="", data={"content": block.logprobs}))
        if block.text:
            events.append(ir.BlockDelta(index=index, kind=_TEXT_DELTA[block.kind], text=block.text))
        events.extend(ir.BlockDelta(index=index, kind="citation", text="", data=c) for c in block.citations)
        if block.signature is not None:
            events.append(ir.BlockDelta(index=index, kind="signature", text=block.signature))
        events.append(ir.BlockStop(index=index))
    events.append(resp.usage)
    if resp.error is not None:
        events.append(resp.error)
    else:
        events.append(resp.finish or ir.Finish(ir.FinishReason.STOP))
    return events
