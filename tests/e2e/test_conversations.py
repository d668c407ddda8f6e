"""Conversation state on every upstream: ``previous_response_id`` keeps the conversation whichever
protocol answers it, and stored responses can be read back, listed and deleted.

What the conversation was is checked where it matters, at the scripted upstream: the requests it
received, in its own protocol. Clients are the official ``openai`` SDK.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

OTHER_KEY = "gw-e2e-other-key"
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
INSTRUCTIONS = "Answer like a pirate."


@pytest.fixture
def conversations(transactional_db: Any, mock_upstream: Server, gateway: Server) -> openai.OpenAI:
    config = pool_config(mock_upstream)
    config["client_keys"].append({"name": "other", "key": OTHER_KEY})
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    return clients.openai_client(gateway.url, CLIENT_KEY)


def ask(client: openai.OpenAI, stream: bool, **kw: Any) -> Any:
    """``responses.create``; streamed, the response its ``response.completed`` event carried."""

    if not stream:
        return client.responses.create(**kw)
    final = None
    for event in client.responses.create(stream=True, **kw):
        if event.type in ("response.completed", "response.incomplete"):
            final = event.response
    assert final is not None, "the stream ended without its terminal event"
    return final


def three_turns(client: openai.OpenAI, upstream: str, stream: bool) -> list[Any]:
    """Reasoning and text; a tool call; the tool's output and the answer to it."""

    first = ask(client, stream, model=f"up-{upstream}/mock-reasoning", input="Plan a trip to Paris",
                instructions=INSTRUCTIONS, reasoning={"effort": "low"})
    second = ask(client, stream, model=f"up-{upstream}/mock-tool", input="What is the weather there?",
                 previous_response_id=first.id, tools=[WEATHER])
    call = next(item for item in second.output if item.type == "function_call")
    third = ask(client, stream, model=f"up-{upstream}/mock-tool", previous_response_id=second.id, tools=[WEATHER],
                input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24 C"}])
    return [first, second, third]


def last_body(mock: Server) -> dict[str, Any]:
    body: dict[str, Any] = received(mock)[-1]["body"]
    return body


def reasoning_of(response: Any) -> Any:
    return next(item for item in response.output if item.type == "reasoning")


def call_of(response: Any) -> Any:
    return next(item for item in response.output if item.type == "function_call")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_an_anthropic_upstream_gets_the_whole_conversation_in_order(conversations: openai.OpenAI,
                                                                   mock_upstream: Server, stream: bool) -> None:
    first, second, third = three_turns(conversations, "anthropic", stream)
    body = last_body(mock_upstream)
    assert INSTRUCTIONS not in str(body.get("system", "")), "instructions are not inherited"
    turns = [(m["role"], [b["type"] for b in (m["content"] if isinstance(m["content"], list) else
                                              [{"type": "text"}])]) for m in body["messages"]]
    assert turns == [("user", ["text"]), ("assistant", ["thinking", "text"]), ("user", ["text"]),
                     ("assistant", ["tool_use"]), ("user", ["tool_result"])]
    msgs = body["messages"]
    assert "Plan a trip to Paris" in str(msgs[0]["content"])
    assert msgs[1]["content"][0]["signature"] == reasoning_of(first).encrypted_content
    assert msgs[1]["content"][1]["text"] == first.output_text
    assert "What is the weather there?" in str(msgs[2]["content"])
    assert msgs[3]["content"][0]["id"] == call_of(second).call_id
    assert msgs[4]["content"][0]["tool_use_id"] == call_of(second).call_id
    assert "sunny, 24 C" in str(msgs[4]["content"][0]["content"])
    assert third.output_text.startswith("Tool result received") and "sunny, 24 C" in third.output_text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_chat_upstream_gets_the_whole_conversation_in_order(conversations: openai.OpenAI,
                                                             mock_upstream: Server, stream: bool) -> None:
    first, second, third = three_turns(conversations, "openai_chat", stream)
    msgs = last_body(mock_upstream)["messages"]
    assert INSTRUCTIONS not in str(msgs), "instructions are not inherited"
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "tool"]
    assert "Plan a trip to Paris" in str(msgs[0]["content"])
    assert first.output_text in str(msgs[1]["content"])
    assert "What is the weather there?" in str(msgs[2]["content"])
    assert msgs[3]["tool_calls"][0]["id"] == call_of(second).call_id
    assert msgs[4]["tool_call_id"] == call_of(second).call_id and "sunny, 24 C" in str(msgs[4]["content"])
    assert "sunny, 24 C" in third.output_text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_responses_upstream_gets_its_own_id_from_the_account_that_issued_it(
        conversations: openai.OpenAI, mock_upstream: Server, stream: bool) -> None:
    first, second, _ = three_turns(conversations, "responses", stream)
    sent = [r["body"] for r in received(mock_upstream)[-3:]]
    assert sent[1]["previous_response_id"] == first.id and sent[2]["previous_response_id"] == second.id
    assert len(sent[2]["input"]) == 1 and sent[2]["input"][0]["type"] == "function_call_output"


def test_another_responses_account_gets_the_conversation_written_out(transactional_db: Any, gateway: Server,
                                                                    mock_upstream: Server) -> None:
    # Session affinity off: the pool rotates, so the conversation meets the other account.
    load(pool_config(mock_upstream, {"responses": ["sk-good-responses-1", "sk-good-responses-2"]}, affinity=False))
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    first, second, third = three_turns(client, "responses", False)
    got = received(mock_upstream)[-3:]
    assert {g["key_suffix"] for g in got} == {"es-1", "es-2"}, "both accounts were to be used"
    for before, now, previous in ((got[0], got[1], first), (got[1], got[2], second)):
        if now["key_suffix"] == before["key_suffix"]:
            assert now["body"]["previous_response_id"] == previous.id
            continue
        assert "previous_response_id" not in now["body"]
        assert all("id" not in item for item in now["body"]["input"]), "ids are the other account's"
    # The first answer's reasoning was minted by the account that answered it (the upstream refuses it
    # from any other: mockupstream.minted): written out, it goes only to that account.
    written = [g for g in got[1:] if "previous_response_id" not in g["body"]]
    for g in written:
        kinds = [item["type"] for item in g["body"]["input"]]
        if g["key_suffix"] == got[0]["key_suffix"]:
            assert kinds[:3] == ["message", "reasoning", "message"]
            assert g["body"]["input"][1]["encrypted_content"] == reasoning_of(first).encrypted_content
        else:
            assert kinds[:2] == ["message", "message"] and "reasoning" not in kinds
        assert INSTRUCTIONS not in str(g["body"].get("instructions"))
    assert "sunny, 24 C" in third.output_text


def test_a_stored_response_reads_back_and_lists_its_input(conversations: openai.OpenAI) -> None:
    first, second, third = three_turns(conversations, "anthropic", True)
    got = conversations.responses.retrieve(third.id)
    assert got.id == third.id and got.output_text == third.output_text
    assert got.previous_response_id == second.id
    every = conversations.responses.input_items.list(third.id, order="asc", limit=100)
    kinds = [item.type for item in every.data]
    assert kinds == ["message", "reasoning", "message", "message", "function_call", "function_call_output"]
    assert every.first_id == every.data[0].id and every.last_id == every.data[-1].id and not every.has_more
    ids = [item.id for item in every.data]
    assert ids[1] == reasoning_of(first).id and ids[4] == call_of(second).id
    page = conversations.responses.input_items.list(third.id, order="asc", limit=2)
    assert [i.id for i in page.data] == ids[:2] and page.has_more
    page = conversations.responses.input_items.list(third.id, order="asc", limit=2, after=page.last_id)
    assert [i.id for i in page.data] == ids[2:4] and page.has_more
    newest = conversations.responses.input_items.list(third.id, limit=2)  # the API's default order: desc
    assert [i.id for i in newest.data] == ids[::-1][:2]
    before = conversations.responses.input_items.list(third.id, order="asc", extra_query={"before": ids[3]})
    assert [i.id for i in before.data] == ids[:3] and not before.has_more
    assert [i.id for i in conversations.responses.input_items.list(third.id, order="asc")] == ids  # SDK paging


def test_a_deleted_response_is_gone_and_cannot_be_continued(conversations: openai.OpenAI) -> None:
    first = conversations.responses.create(model="up-anthropic/mock-text", input="hello")
    deleted = conversations.responses.delete(first.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        conversations.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError) as caught:
        conversations.responses.create(model="up-anthropic/mock-text", input="again", previous_response_id=first.id)
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        conversations.responses.delete(first.id)


def test_an_unknown_id_is_a_404_and_the_upstream_never_asked(conversations: openai.OpenAI,
                                                           mock_upstream: Server) -> None:
    before = len(received(mock_upstream))
    for upstream in ("openai_chat", "anthropic", "responses"):
        with pytest.raises(openai.NotFoundError) as caught:
            conversations.responses.create(model=f"up-{upstream}/mock-text", input="hi",
                                           previous_response_id="resp_never_issued")
        body: Any = caught.value.body
        assert body["type"] == "invalid_request_error" and body["param"] == "previous_response_id"
        assert "resp_never_issued" in body["message"]
    assert len(received(mock_upstream)) == before
    with pytest.raises(openai.NotFoundError):
        conversations.responses.retrieve("resp_never_issued")
    with pytest.raises(openai.NotFoundError):
        conversations.responses.input_items.list("resp_never_issued")


def test_another_keys_response_is_unknown(conversations: openai.OpenAI, gateway: Server) -> None:
    mine = conversations.responses.create(model="up-openai_chat/mock-text", input="a secret plan")
    other = clients.openai_client(gateway.url, OTHER_KEY)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.input_items.list(mine.id)
    with pytest.raises(openai.NotFoundError) as caught:
        other.responses.create(model="up-openai_chat/mock-text", input="go on", previous_response_id=mine.id)
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(mine.id)
    assert conversations.responses.retrieve(mine.id).id == mine.id, "another key's delete touched nothing"


@pytest.mark.parametrize("upstream", ["anthropic", "responses"])
def test_store_false_is_not_kept(conversations: openai.OpenAI, upstream: str) -> None:
    answer = conversations.responses.create(model=f"up-{upstream}/mock-text", input="forget me", store=False)
    with pytest.raises(openai.NotFoundError):
        conversations.responses.retrieve(answer.id)
    with pytest.raises(openai.NotFoundError):
        conversations.responses.create(model=f"up-{upstream}/mock-text", input="and?",
                                       previous_response_id=answer.id)


def test_cancel_is_refused_for_a_finished_response(conversations: openai.OpenAI) -> None:
    answer = conversations.responses.create(model="up-openai_chat/mock-text", input="hi")
    with pytest.raises(openai.BadRequestError) as caught:
        conversations.responses.cancel(answer.id)
    assert "background" in str(caught.value)
    with pytest.raises(openai.NotFoundError):
        conversations.responses.cancel("resp_never_issued")


@pytest.mark.parametrize("upstream", ["anthropic", "responses"])
def test_a_follow_up_sent_on_the_final_event_finds_the_answer_on_another_process(
        conversations: openai.OpenAI, django_db_blocker: Any, mock_upstream: Server, upstream: str) -> None:
    with own_gateway(django_db_blocker) as second:
        elsewhere = clients.openai_client(second.url, CLIENT_KEY)
        follow_ups = []
        for event in conversations.responses.create(model=f"up-{upstream}/mock-text", input="first", stream=True):
            if event.type == "response.completed":  # the stream has not ended yet: asked at once
                follow_ups.append(elsewhere.responses.create(
                    model=f"up-{upstream}/mock-text", input="second", previous_response_id=event.response.id))
        assert len(follow_ups) == 1
        if upstream == "anthropic":
            assert [m["role"] for m in last_body(mock_upstream)["messages"]] == ["user", "assistant", "user"]


def test_bad_conversation_input_is_a_clear_400(conversations: openai.OpenAI, gateway: Server) -> None:
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    answer = httpx.post(gateway.url + "/v1/responses", headers=headers, timeout=10,
                        json={"model": "up-anthropic/mock-text", "input": "hi", "previous_response_id": 5})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "previous_response_id"
    stored = conversations.responses.create(model="up-anthropic/mock-text", input="hi")
    for query, param in (("limit=0", "limit"), ("limit=many", "limit"), ("order=sideways", "order")):
        listing = httpx.get(f"{gateway.url}/v1/responses/{stored.id}/input_items?{query}", headers=headers)
        assert listing.status_code == 400 and listing.json()["error"]["param"] == param
    assert httpx.get(f"{gateway.url}/v1/responses/{stored.id}", timeout=10).status_code == 401


@pytest.mark.parametrize("upstream", ["anthropic", "responses"])
def test_a_background_response_is_refused_up_front(conversations: openai.OpenAI, mock_upstream: Server,
                                                   upstream: str) -> None:
    before = len(received(mock_upstream))
    with pytest.raises(openai.BadRequestError) as caught:
        conversations.responses.create(model=f"up-{upstream}/mock-text", input="later", background=True)
    assert caught.value.body["param"] == "background"  # type: ignore[index]
    assert len(received(mock_upstream)) == before


def test_a_conversation_moved_to_another_provider_goes_whole_but_without_the_first_ones_signature(
        conversations: openai.OpenAI, mock_upstream: Server) -> None:
    first = ask(conversations, False, model="up-anthropic/mock-reasoning", input="Plan a trip",
                reasoning={"effort": "low"})
    signature = reasoning_of(first).encrypted_content
    assert signature
    back_home = ask(conversations, False, model="up-anthropic/mock-text", input="and then?",
                    previous_response_id=first.id)
    assert signature in str(last_body(mock_upstream)["messages"][1]), "its own provider gets the signature"
    ask(conversations, False, model="up-responses/mock-text", input="and then?", previous_response_id=back_home.id)
    sent = last_body(mock_upstream)
    assert signature not in str(sent) and "previous_response_id" not in sent
    assert [i.get("role") for i in sent["input"]] == ["user", "assistant", "user", "assistant", "user"]
    ask(conversations, False, model="up-openai_chat/mock-text", input="and then?", previous_response_id=back_home.id)
    sent = last_body(mock_upstream)
    assert signature not in str(sent)
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert first.output_text in str(sent["messages"][1])
