"""Compaction of a Responses conversation (docs/compaction.md), through the official OpenAI SDK.

On a Chat or Messages upstream the gateway compacts itself: the upstream model is asked for a
summary, the client gets it sealed in a ``compaction`` item, and the next turn reaches the
upstream with the summary in the item's place. On a Responses upstream both the compact request
and the items are the upstream's business and pass through untouched.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, received
from translation.sse import SSEParser

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"authorization": f"Bearer {CLIENT_KEY}"}
HISTORY: list[Any] = [
    {"role": "user", "content": "My favourite colour is teal; remember it."},
    {"role": "assistant", "content": "Noted: teal."},
    {"role": "user", "content": "The project lives in /srv/kettle."},
    {"role": "assistant", "content": "Got it."},
]


def bodies(mock: Server, path: str) -> list[dict[str, Any]]:
    return [r["body"] for r in received(mock) if r["path"] == path]


def user_texts(chat_body: dict[str, Any]) -> list[str]:
    out = []
    for message in chat_body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            out.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
    return out


def compact(gateway: Server, model: str, history: list[Any]) -> Any:
    return clients.openai_client(gateway.url, CLIENT_KEY).responses.compact(model=model, input=history)


@pytest.mark.parametrize("upstream", ["openai_chat", "anthropic"])
def test_compact_through_a_translated_upstream_returns_a_sealed_summary(pool: Any, gateway: Server,
                                                                      mock_upstream: Server, upstream: str) -> None:
    result = compact(gateway, f"up-{upstream}/mock-text", HISTORY)
    items = [item for item in result.output if item.type == "compaction"]
    assert len(items) == 1 and items[0].encrypted_content
    # The summary is the gateway's to read, not the client's.
    assert "teal" not in items[0].encrypted_content
    # The user's own messages come back beside it, as OpenAI's endpoint gives them.
    assert [i.role for i in result.output if i.type == "message"] == ["user", "user"]
    assert result.usage.output_tokens > 0
    # The upstream was asked, on its own protocol, with the whole history and the summary prompt last.
    path = "/v1/chat/completions" if upstream == "openai_chat" else "/v1/messages"
    asked = bodies(mock_upstream, path)[-1]
    assert "teal" in str(asked) and "You are compacting this conversation" in str(asked)


def test_the_next_turn_reaches_a_chat_upstream_with_the_summary(pool: Any, gateway: Server,
                                                               mock_upstream: Server) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    model = "up-openai_chat/mock-text"
    window = [item.model_dump(exclude_none=True, warnings=False)
              for item in compact(gateway, model, HISTORY).output]
    answer = client.responses.create(model=model, input=[*window, {"role": "user", "content": "Which colour?"}])
    assert answer.output_text  # answered
    texts = user_texts(bodies(mock_upstream, "/v1/chat/completions")[-1])
    summary = [t for t in texts if t.startswith("Summary of the conversation so far")]
    # What the upstream model wrote as the summary (the scripted upstream lists the user's messages).
    assert len(summary) == 1 and "teal" in summary[0] and "/srv/kettle" in summary[0]
    assert texts[-1] == "Which colour?"
    assert not any("gwc2." in t for t in texts)


def test_a_compaction_item_the_gateway_did_not_seal_is_refused_for_a_chat_upstream(pool: Any, gateway: Server,
                                                                                   mock_upstream: Server) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    sealed = compact(gateway, "up-openai_chat/mock-text", HISTORY).output[-1].model_dump(exclude_none=True)
    tampered = {**sealed, "encrypted_content": sealed["encrypted_content"][:-6] + "AAAAAA"}
    foreign = {"type": "compaction", "encrypted_content": "gAAAAABpZ2VuZXJhdGVkLWJ5LW9wZW5haQ=="}
    httpx.post(mock_upstream.url + "/_mock/reset")
    for item in (tampered, foreign):
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model="up-openai_chat/mock-text",
                                    input=[item, {"role": "user", "content": "go on"}])
        assert info.value.status_code == 400
        assert info.value.param == "input[0].encrypted_content"
        assert "compaction item" in info.value.message
    assert received(mock_upstream) == []  # nothing reached the upstream


def test_compact_through_a_responses_upstream_is_forwarded(pool: Any, gateway: Server,
                                                            mock_upstream: Server) -> None:
    result = compact(gateway, "up-responses/mock-text", HISTORY)
    # The upstream's own compaction item, untouched.
    assert result.output[-1].type == "compaction"
    assert result.output[-1].encrypted_content.startswith("mock-upstream-compaction-")
    forwarded = bodies(mock_upstream, "/v1/responses/compact")[-1]
    assert forwarded["model"] == "mock-text" and forwarded["input"] == HISTORY
    # ... and the next turn takes it back to the upstream as it was.
    item = result.output[-1].model_dump(exclude_none=True)
    clients.openai_client(gateway.url, CLIENT_KEY).responses.create(
        model="up-responses/mock-text", input=[item, {"role": "user", "content": "go on"}])
    assert bodies(mock_upstream, "/v1/responses")[-1]["input"][0] == item


SHELL = {"type": "function", "name": "exec_command", "description": "Run a command",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
# As Codex sends it: the tools, and a history with a tool call in it.
TOOL_TURN: list[Any] = [
    {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "kettle.py"},
]


def trigger_body(model: str, stream: bool) -> dict[str, Any]:
    return {"model": model, "stream": stream, "store": False, "instructions": "You are a coding agent.",
            "tools": [SHELL], "input": [*HISTORY, *TOOL_TURN, {"type": "compaction_trigger"}]}


@pytest.mark.parametrize("upstream", ["openai_chat", "anthropic"])
def test_codex_compaction_trigger_streams_one_compaction_item_from_a_translated_upstream(
        pool: Any, gateway: Server, mock_upstream: Server, upstream: str) -> None:
    model = f"up-{upstream}/mock-tool"  # a model that would call a tool if it were allowed to
    resp = httpx.post(gateway.url + "/v1/responses", json=trigger_body(model, True),
                      headers={**HEADERS, "x-codex-beta-features": "remote_compaction_v2"}, timeout=30)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    parser = SSEParser()
    events = [(e.event, httpx.Response(200, content=e.data).json()) for e in parser.feed(resp.content)]
    done = [data["item"] for name, data in events if name == "response.output_item.done"]
    assert [item["type"] for item in done] == ["compaction"] and done[0]["encrypted_content"]
    assert events[-1][0] == "response.completed"
    assert events[-1][1]["response"]["output"] == done
    # The trigger did not reach the upstream; the summary prompt did, with tools declared but not allowed.
    asked = received(mock_upstream)[-1]["body"]
    assert "compaction_trigger" not in str(asked) and "You are compacting" in str(asked["messages"][-1])
    assert "kettle.py" in str(asked["messages"])
    assert asked["tool_choice"] in ("none", {"type": "none"})
    # Non-streamed, the same answer as one response object.
    plain = httpx.post(gateway.url + "/v1/responses", json=trigger_body(model, False),
                       headers=HEADERS, timeout=30).json()
    assert [item["type"] for item in plain["output"]] == ["compaction"]


def test_codex_compaction_trigger_is_forwarded_to_a_responses_upstream(pool: Any, gateway: Server,
                                                                      mock_upstream: Server) -> None:
    resp = httpx.post(gateway.url + "/v1/responses", json=trigger_body("up-responses/mock-text", True),
                      headers={**HEADERS, "x-codex-beta-features": "remote_compaction_v2"}, timeout=30)
    assert resp.status_code == 200
    got = received(mock_upstream)[-1]
    assert got["path"] == "/v1/responses"
    assert got["body"]["input"][-1] == {"type": "compaction_trigger"}
    assert got["headers"]["x-codex-beta-features"] == "remote_compaction_v2"


def test_a_bad_compact_request_is_a_400_in_the_responses_envelope(pool: Any, gateway: Server,
                                                                  mock_upstream: Server) -> None:
    for body in (b"{not json", b'{"input": "no model"}', b'{"model": "up-openai_chat/mock-text", "input": 7}'):
        resp = httpx.post(gateway.url + "/v1/responses/compact", content=body,
                          headers={**HEADERS, "content-type": "application/json"}, timeout=30)
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["type"] == "invalid_request_error"
    assert httpx.post(gateway.url + "/v1/responses/compact", json={"model": "up-openai_chat/mock-text", "input": "x"},
                      timeout=30).status_code == 401
    assert received(mock_upstream) == []


def test_compaction_and_previous_response_id_together_on_a_chat_upstream(pool: Any, gateway: Server,
                                                                         mock_upstream: Server) -> None:
    """A conversation carried by ``previous_response_id`` is summarised whole, and a sealed item in a
    follow-up is opened inside the conversation the gateway writes out."""

    client = clients.openai_client(gateway.url, CLIENT_KEY)
    model = "up-openai_chat/mock-text"
    first = client.responses.create(model=model, input="My favourite colour is teal; remember it.")
    # Compacting the conversation the id names: the summary request carries the first turn.
    result = client.responses.compact(model=model, input=[{"role": "user", "content": "And the cat is Ada."}],
                                      extra_body={"previous_response_id": first.id})
    asked = bodies(mock_upstream, "/v1/chat/completions")[-1]
    assert "teal" in str(asked) and "Ada" in str(asked)
    window = [i.model_dump(exclude_none=True, warnings=False) for i in result.output if i.type == "compaction"]
    # A follow-up naming the first response and carrying the sealed item: both reach the upstream.
    answer = client.responses.create(model=model, previous_response_id=first.id,
                                     input=[*window, {"role": "user", "content": "Which colour?"}])
    assert answer.output_text
    texts = user_texts(bodies(mock_upstream, "/v1/chat/completions")[-1])
    assert texts[0] == "My favourite colour is teal; remember it."
    assert any(t.startswith("Summary of the conversation so far") and "Ada" in t for t in texts)
    assert texts[-1] == "Which colour?" and not any("gwc2." in t for t in texts)


def turns(gateway: Server, model: str) -> Any:
    """Two turns of a conversation carried by ``previous_response_id``; the second answer."""

    client = clients.openai_client(gateway.url, CLIENT_KEY)
    first = client.responses.create(model=model, input="My favourite colour is teal; remember it.")
    return client.responses.create(model=model, previous_response_id=first.id,
                                   input="The project lives in /srv/kettle.")


@pytest.mark.parametrize("upstream", ["openai_chat", "anthropic", "responses"])
def test_compact_by_reference_compacts_the_conversation_the_id_names(pool: Any, gateway: Server,
                                                                   mock_upstream: Server, upstream: str) -> None:
    """openai-agents' compaction session sends ``previous_response_id`` and no ``input``: the conversation
    the id names is what gets compacted, on every upstream."""

    model = f"up-{upstream}/mock-text"
    second = turns(gateway, model)
    result = clients.openai_client(gateway.url, CLIENT_KEY).responses.compact(model=model,
                                                                               previous_response_id=second.id)
    compacted = [item for item in result.output if item.type == "compaction"]
    assert len(compacted) == 1 and compacted[0].encrypted_content
    if upstream == "responses":
        # The upstream issued the id (on the account that answered it): the id goes up as it is.
        forwarded = bodies(mock_upstream, "/v1/responses/compact")[-1]
        assert forwarded["previous_response_id"] == second.id and "input" not in forwarded
        assert compacted[0].encrypted_content.startswith("mock-upstream-compaction-")
        return
    # The gateway compacts: the summary request carries both turns, and the window keeps the user's messages.
    asked = received(mock_upstream)[-1]["body"]
    assert "teal" in str(asked) and "/srv/kettle" in str(asked) and "You are compacting" in str(asked)
    kept = [item.content[0].text for item in result.output if item.type == "message"]
    assert kept == ["My favourite colour is teal; remember it.", "The project lives in /srv/kettle."]
    assert "teal" not in compacted[0].encrypted_content


def test_compact_by_reference_writes_the_conversation_out_for_an_upstream_that_did_not_issue_the_id(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    second = turns(gateway, "up-openai_chat/mock-text")  # answered by another provider
    result = clients.openai_client(gateway.url, CLIENT_KEY).responses.compact(model="up-responses/mock-text",
                                                                               previous_response_id=second.id)
    assert result.output[-1].type == "compaction"
    forwarded = bodies(mock_upstream, "/v1/responses/compact")[-1]
    assert "previous_response_id" not in forwarded
    said = [item for item in forwarded["input"] if item.get("role") == "user"]
    assert "teal" in str(said[0]) and "/srv/kettle" in str(said[1])


def test_compact_without_input_or_previous_response_id_is_still_a_400(pool: Any, gateway: Server,
                                                                      mock_upstream: Server) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        clients.openai_client(gateway.url, CLIENT_KEY).responses.compact(model="up-openai_chat/mock-text")
    assert info.value.param == "input"
    assert received(mock_upstream) == []
