"""The managed settings' checksum, the client's own: ``sha256:`` and the hex SHA-256 of the settings
as JSON with the keys sorted at every level and no whitespace. The client computes it with
JavaScript's ``JSON.stringify``, so the encoding here follows that function where Python's ``json``
differs: object keys sort by UTF-16 code units, integral floats print without ``.0``, exponents as
``1e-7`` / ``1e+21``; strings are escaped alike (``ensure_ascii=False``).
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any


def canonical(value: Any) -> str:
    """``value`` as JavaScript's ``JSON.stringify`` writes it once every object's keys are sorted."""

    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]).encode("utf-16-be"))
        return "{" + ",".join(f"{_string(str(k))}:{canonical(v)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _number(x: float) -> str:
    """ECMAScript's Number::toString: shortest round-trip digits, as Python's repr finds them."""

    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    text = repr(x)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    exp = int(exponent)
    if -7 < exp < 21:  # JavaScript writes these without an exponent (Python from 1e-5 and 1e16 on)
        return format(Decimal(text), "f")
    return f"{mantissa}e{'+' if exp > 0 else '-'}{abs(exp)}"


def checksum(settings: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(settings).encode("utf-8")).hexdigest()
