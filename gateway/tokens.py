"""A local input-token estimate for /v1/messages/count_tokens (Claude Code calls it often).

Roughly four characters per token over everything the model reads; images are
counted at a flat rate. Good enough for context-window bookkeeping, free of any
upstream round trip.
"""

from __future__ import annotations

from translation import ir, sse

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1600


def estimate_input_tokens(req: ir.Request) -> int:
    chars = sum(len(p.text) for p in req.system)
    images = 0
    for msg in req.messages:
        for part in msg.parts:
            if isinstance(part, ir.TextPart):
                chars += len(part.text)
            elif isinstance(part, ir.ImagePart):
                images += 1
            elif isinstance(part, ir.ToolCallPart):
                chars += len(part.name) + len(part.arguments)
            elif isinstance(part, ir.ToolResultPart):
                chars += len(part.text())
                images += sum(1 for p in part.content if isinstance(p, ir.ImagePart))
            elif isinstance(part, ir.ReasoningPart):
                chars += len(part.text)
    for tool in req.tools:
        chars += len(tool.name) + len(tool.description or "") + len(sse.dumps(tool.parameters))
    return max(1, chars // CHARS_PER_TOKEN + images * IMAGE_TOKENS)
