"""The passthrough's upstream body made of the client's own bytes: only what changes is written.

A same-protocol request goes upstream as the client sent it, with the model name the route
gives (``<protocol>.passthrough_request`` says what else may change: fields an upstream's caps
forbid, a Chat stream's ``stream_options.include_usage``). Serialising the whole body again for
that costs a pass over every byte of a conversation that may be megabytes; :func:`upstream_bytes`
instead (:func:`spliced`) splices the new values into the client's bytes:

- the top-level ``"model"`` value is replaced where it stands, whatever whitespace surrounds it and
  however its value is escaped;
- fields the passthrough adds that the client did not send are written at the head of the object.

It does so only where the bytes leave no doubt: the key ``"model"`` occurs once in the whole body,
spelled plainly (no ``\\u`` escape in the body could spell it, so the one occurrence is the top-level
key), and its value, read back, is the value parsed. Anything else (a tool schema with a ``model``
property, a field removed or changed in place, a body that does not start with an object) is
serialised whole, as before; the result is the same JSON either way.
"""

from __future__ import annotations

from typing import Any

import orjson

_KEY = b'"model"'
_SPACE = b" \t\r\n"
# Every letter of "model" escaped begins so (\u006d, \u006f, \u0064, \u0065, \u006c, in either case).
_ESCAPED_LETTER = b"\\u006"


def spliced(raw: bytes, body: dict[str, Any], out: dict[str, Any]) -> bytes | None:
    """``out`` (the passthrough's body for the upstream, made of ``body``) as the client's bytes of
    ``body`` (``raw``) with what changed spliced in; None when it must be serialised whole."""

    added: list[str] = []
    for key, value in out.items():
        if key == "model":
            continue
        if key not in body:
            added.append(key)
        elif value is not body[key] and value != body[key]:
            return None  # changed in place: the whole body is written
    if len(body) + len(added) != len(out):
        return None  # a field removed
    model = out.get("model")
    new = raw if model == body.get("model") else splice_model(raw, body, model)
    if new is None or not added:
        return new
    head = len(new) - len(new.lstrip(_SPACE))
    if new[head:head + 1] != b"{":
        return None
    try:
        fields = b"".join(orjson.dumps(key) + b":" + orjson.dumps(out[key]) + b"," for key in added)
    except TypeError:
        return None  # written whole, where the body's refusal is
    return new[:head + 1] + fields + new[head + 1:]


def splice_model(raw: bytes, body: dict[str, Any], model: Any) -> bytes | None:
    """``raw`` (the bytes ``body`` was parsed from) with its top-level ``model`` value replaced by
    ``model``; None when that cannot be done with certainty."""

    if not isinstance(model, str) or not isinstance(body.get("model"), str) or _ESCAPED_LETTER in raw:
        return None
    at = raw.find(_KEY)
    if at < 0 or raw.find(_KEY, at + 1) >= 0:
        return None
    i = _skip_space(raw, at + len(_KEY))
    if raw[i:i + 1] != b":":
        return None
    start = _skip_space(raw, i + 1)
    end = _string_end(raw, start)
    if end is None:
        return None
    try:
        if orjson.loads(raw[start:end]) != body["model"]:
            return None
    except orjson.JSONDecodeError:
        return None
    return raw[:start] + orjson.dumps(model) + raw[end:]


def _skip_space(raw: bytes, i: int) -> int:
    while raw[i:i + 1] and raw[i:i + 1] in _SPACE:
        i += 1
    return i


def _string_end(raw: bytes, start: int) -> int | None:
    """The index just past the JSON string that opens at ``start``; None if none opens there."""

    if raw[start:start + 1] != b'"':
        return None
    i = start
    while True:
        i = raw.find(b'"', i + 1)
        if i < 0:
            return None
        backslashes = 0
        while raw[i - 1 - backslashes] == 0x5C:  # a quote after an odd run of backslashes is escaped
            backslashes += 1
        if backslashes % 2 == 0:
            return i + 1
