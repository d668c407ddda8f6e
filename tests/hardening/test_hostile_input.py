"""Hostile bodies at every API endpoint of a real gateway: a 4xx in the caller's envelope, never a 500 or a hang.

Property tests mutate a valid body of each protocol at any point (wrong types,
removed and unknown fields, odd roles), or send arbitrary bytes and invalid
UTF-8; the fixed cases cover what random generation rarely reaches: nesting
past the JSON parser's and encoder's depth limits, thousands of tools, 10 MB
fields, and bodies over the size limit, declared or chunked, which must be
refused before they have been read whole.
"""

from __future__ import annotations

import copy
import json
import select
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.conftest import CLIENT_KEY
from tests.hardening.envelope import CHAT, COUNT, MSGS, RESP, check_answer, check_error_envelope
from tests.hardening.raw_http import read_answer
from tests.servers import Server
from translation.sse import SSEParser

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json"}
TIMEOUT = httpx.Timeout(30.0)  # a hang shows up as this timeout, which fails the test

TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
VALID: dict[str, dict[str, Any]] = {
    CHAT: {"model": "up-openai_chat/mock-text", "max_tokens": 20, "temperature": 0.5, "stream": False,
           "messages": [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
           "tools": [{"type": "function", "function": {"name": "w", "description": "d", "parameters": TOOL_SCHEMA}}],
           "tool_choice": "auto"},
    MSGS: {"model": "up-anthropic/mock-text", "max_tokens": 20, "system": [{"type": "text", "text": "be brief"}],
           "stream": False, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
           "tools": [{"name": "w", "description": "d", "input_schema": TOOL_SCHEMA}],
           "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024}},
    RESP: {"model": "up-responses/mock-text", "instructions": "be brief", "max_output_tokens": 20, "stream": False,
           "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
           "tools": [{"type": "function", "name": "w", "description": "d", "parameters": TOOL_SCHEMA}],
           "reasoning": {"effort": "low"}},
}
VALID[COUNT] = {k: v for k, v in VALID[MSGS].items() if k not in ("max_tokens", "stream")}
ENDPOINTS = [CHAT, MSGS, RESP, COUNT]

# Any JSON value, big integers included (json.dumps writes them; the gateway's parser must cope).
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30)
           | st.sampled_from(["", "user", "assistant", "system", "tool", "developer", "function", "wizard",
                              "text", "image", "tool_use", "tool_result", "input_text", "function_call", "auto",
                              "none", "required", "enabled", "up-openai_chat/mock-text", "up-anthropic/mock-text"]))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=10)
INVALID_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80",
                b"\xe2\x82", b"\xf0\x28\x8c\x28", b"\xc0\xaf"]

pytest_hypothesis = settings(max_examples=35, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def post(gateway: Server, path: str, content: bytes) -> httpx.Response:
    return httpx.post(gateway.url + path, content=content, headers=HEADERS, timeout=TIMEOUT)


def dumps(body: Any) -> bytes:
    return json.dumps(body).encode()


def nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value`` (not the root itself)."""

    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield (*path, key)
        yield from nodes(child, (*path, key))


def mutate(body: dict[str, Any], path: tuple[Any, ...], op: str, value: Any, new_key: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    else:  # add an unknown key next to this one (or to the enclosing object)
        target = parent if isinstance(parent, dict) else out
        target[new_key] = value
    return out


@pytest.mark.parametrize("path", ENDPOINTS)
@settings(parent=pytest_hypothesis)
@given(data=st.data())
def test_a_body_broken_at_any_point_gets_a_4xx_or_a_valid_answer(pool: Any, gateway: Server, path: str,
                                                               data: st.DataObject) -> None:
    base = VALID[path]
    where = data.draw(st.sampled_from(list(nodes(base))), label="where")
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]), label="op")
    value = data.draw(JSON_VALUES, label="value")
    new_key = data.draw(st.text(min_size=1, max_size=12), label="new_key")
    body = mutate(base, where, op, value, new_key)
    check_answer(path, post(gateway, path, dumps(body)))


@pytest.mark.parametrize("path", ENDPOINTS)
@settings(parent=pytest_hypothesis)
@given(message=st.fixed_dictionaries({"role": SCALARS}, optional={"content": JSON_VALUES, "name": SCALARS,
                                                                    "tool_calls": JSON_VALUES,
                                                                    "tool_call_id": SCALARS}))
def test_messages_with_odd_roles_and_content_get_a_4xx_or_a_valid_answer(pool: Any, gateway: Server, path: str,
                                                                        message: dict[str, Any]) -> None:
    body = copy.deepcopy(VALID[path])
    if path == RESP:
        body["input"] = [message]
    else:
        body["messages"] = [message]
    check_answer(path, post(gateway, path, dumps(body)))


@pytest.mark.parametrize("path", ENDPOINTS)
@settings(parent=pytest_hypothesis)
@given(raw=st.binary(max_size=300) | st.sampled_from([b"{", b"[]", b"null", b"1", b'"x"', b"{}", b"\x00",
                                                        b"{" * 5000, b'{"model":' * 300]))
def test_arbitrary_bytes_get_a_4xx(pool: Any, gateway: Server, path: str, raw: bytes) -> None:
    resp = post(gateway, path, raw)
    check_error_envelope(path, resp.status_code, resp.headers, resp.content)


@pytest.mark.parametrize("path", ENDPOINTS)
@settings(parent=pytest_hypothesis)
@given(data=st.data())
def test_invalid_utf8_inside_a_string_gets_a_4xx(pool: Any, gateway: Server, path: str, data: st.DataObject) -> None:
    raw = dumps(VALID[path])
    quotes = [i for i, b in enumerate(raw) if b == ord('"')]
    at = data.draw(st.sampled_from(quotes), label="at") + 1  # just inside some string
    bad = data.draw(st.sampled_from(INVALID_UTF8), label="bytes")
    resp = post(gateway, path, raw[:at] + bad + raw[at:])
    check_error_envelope(path, resp.status_code, resp.headers, resp.content)


DEEP = "@@deep@@"


def with_depth(body: Any, depth: int, leaf: bytes = b"1") -> bytes:
    """``body`` as JSON with the placeholder ``DEEP`` turned into ``depth`` nested arrays
    (written as text: Python's own encoder stops at its recursion limit)."""

    return dumps(body).replace(json.dumps(DEEP).encode(), b"[" * depth + leaf + b"]" * depth)


def where_to_nest(path: str) -> list[dict[str, Any]]:
    """The valid body with ``DEEP`` placed in a tool schema, in message content and as an unknown field."""

    schema = {**VALID[path], "tools": copy.deepcopy(VALID[path]["tools"])}
    tool = schema["tools"][0]
    target = tool["function"]["parameters"] if path == CHAT else tool.get("input_schema", tool.get("parameters"))
    target["properties"]["city"]["enum"] = DEEP
    content = copy.deepcopy(VALID[path])
    key = "input" if path == RESP else "messages"
    content[key][-1]["content"] = DEEP
    bodies = [schema, content, {**VALID[path], "extra_field": DEEP}]
    # Fields another upstream never sees but the answer echoes (Responses) or reads (Chat), streamed
    # and not: too deep, these used to fail after the status line was out (a 500, or a hung stream).
    other = {**VALID[path], "model": "up-anthropic/mock-text" if path != MSGS else "up-responses/mock-text"}
    if path == RESP:
        echoed = {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object", "x": DEEP}}}
        bodies += [{**other, "text": echoed, "stream": stream} for stream in (False, True)]
    elif path == CHAT:
        schema_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"x": DEEP}}}
        bodies += [{**other, "response_format": schema_format, "stream": stream} for stream in (False, True)]
    return bodies


@pytest.mark.parametrize("path", ENDPOINTS)
def test_json_nested_10000_deep_is_a_400(pool: Any, gateway: Server, path: str) -> None:
    deep = b"[" * 10_000 + b"]" * 10_000
    for raw in [deep, b'{"model": "up-openai_chat/mock-text", "messages": ' + deep + b"}"]:
        resp = post(gateway, path, raw)
        assert resp.status_code == 400
        check_error_envelope(path, resp.status_code, resp.headers, resp.content)


@pytest.mark.parametrize("depth", [300, 1000])
@pytest.mark.parametrize("path", ENDPOINTS)
def test_json_the_parser_accepts_but_too_deep_to_send_on_is_a_400(pool: Any, gateway: Server, path: str,
                                                                 depth: int) -> None:
    # orjson parses 1024 levels but serialises only 254: such a body used to reach the
    # upstream encoder and come back as a 500.
    for body in where_to_nest(path):
        resp = post(gateway, path, with_depth(body, depth))
        assert resp.status_code == 400, resp.text[:300]
        check_error_envelope(path, resp.status_code, resp.headers, resp.content)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_nesting_a_real_schema_might_use_is_served(pool: Any, gateway: Server, path: str) -> None:
    resp = post(gateway, path, with_depth(where_to_nest(path)[0], 60, b'"x"'))
    assert resp.status_code == 200, resp.text[:300]


def many_tools(path: str, count: int) -> list[dict[str, Any]]:
    if path == CHAT:
        return [{"type": "function", "function": {"name": f"t{i}", "parameters": TOOL_SCHEMA}} for i in range(count)]
    if path == RESP:
        return [{"type": "function", "name": f"t{i}", "parameters": TOOL_SCHEMA} for i in range(count)]
    return [{"name": f"t{i}", "input_schema": TOOL_SCHEMA} for i in range(count)]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_thousands_of_tools_are_answered(pool: Any, gateway: Server, path: str) -> None:
    resp = post(gateway, path, dumps({**VALID[path], "tools": many_tools(path, 5000)}))
    check_answer(path, resp)
    broken = many_tools(path, 3000) + [{"type": "function"}, 7, None]
    check_error_envelope(path, *_parts(post(gateway, path, dumps({**VALID[path], "tools": broken}))))


def _parts(resp: httpx.Response) -> tuple[int, httpx.Headers, bytes]:
    return resp.status_code, resp.headers, resp.content


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_10_mb_single_field_is_answered(pool: Any, gateway: Server, path: str) -> None:
    huge = "x" * (10 * 1024 * 1024)
    valid = copy.deepcopy(VALID[path])
    valid["input" if path == RESP else "messages"][-1]["content"] = huge
    started = time.monotonic()
    resp = post(gateway, path, dumps(valid))
    assert resp.status_code == 200, resp.text[:300]
    check_answer(path, resp)
    for bad in [{**VALID[path], "model": huge[:1_000_000]}, {**VALID[path], "temperature": huge},
                {**VALID[path], "tools": huge}]:
        check_answer(path, post(gateway, path, dumps(bad)))
    assert time.monotonic() - started < 30


def test_every_endpoint_streams_a_valid_body_to_its_end(pool: Any, gateway: Server) -> None:
    terminators = {CHAT: (None, "[DONE]"), MSGS: ("message_stop", None), RESP: ("response.completed", None)}
    for path, (event, data) in terminators.items():
        resp = post(gateway, path, dumps({**VALID[path], "stream": True}))
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        parser = SSEParser()
        last = [*parser.feed(resp.content), *parser.finish()][-1]
        assert (event is None or last.event == event) and (data is None or last.data == data), last


def _request_head(path: str, extra: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
            "Content-Type: application/json\r\n").encode() + extra + b"\r\n"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_declared_length_over_the_limit_is_refused_before_any_body_is_sent(pool: Any, gateway: Server,
                                                                             path: str) -> None:
    length = django_settings.GATEWAY_MAX_BODY_BYTES + 1
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_request_head(path, f"Content-Length: {length}\r\n".encode()))
        started = time.monotonic()
        status, headers, body = read_answer(sock, timeout=10)
        assert time.monotonic() - started < 5
    assert status == 413
    assert "limit" in check_error_envelope(path, status, headers, body)["error"]["message"]


# (A chunked body without a length on the Messages paths is refused at once, 411: test_messages_fields.)
@pytest.mark.parametrize("path", [CHAT])
def test_a_chunked_body_without_length_is_refused_once_it_passes_the_limit(pool: Any, gateway: Server,
                                                                           path: str) -> None:
    limit = django_settings.GATEWAY_MAX_BODY_BYTES
    chunk = b"x" * (1024 * 1024)
    budget = 4 * limit  # far more than the limit: the gateway must answer long before this is sent
    sent = 0
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_request_head(path, b"Transfer-Encoding: chunked\r\n"))
        answered = False
        while sent < budget:
            if select.select([sock], [], [], 0)[0]:
                answered = True
                break
            try:
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            except OSError:  # the gateway cut the connection after answering
                answered = True
                break
            sent += len(chunk)
        assert answered, f"no answer after {sent} bytes"
        status, headers, body = read_answer(sock, timeout=10)
    assert status == 413
    check_error_envelope(path, status, headers, body)
    assert limit < sent < 2 * limit
