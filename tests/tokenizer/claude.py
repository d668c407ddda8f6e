"""Claude's public tokenizer (npm ``@anthropic-ai/tokenizer``, installed here by ``make test``), run by node.

It is the tokenizer of Claude 2; Claude 3 and later count somewhat differently
and theirs is not public, so it is the nearest real reference that works offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def count(texts: list[str]) -> list[int]:
    """The token count of each text."""

    if shutil.which("node") is None or not (HERE / "node_modules" / "@anthropic-ai" / "tokenizer").is_dir():
        message = "Claude's tokenizer is not installed: run `npm ci --prefix tests/tokenizer` (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run(["node", str(HERE / "count.mjs")], input=json.dumps(texts), capture_output=True,
                          text=True, check=True, timeout=120)
    counts: list[int] = json.loads(done.stdout)
    return counts
