"""Stored Responses answers from outside: an upstream that repeats response ids can never make one
key's answer replace or hide another's, a key that meets the same id twice keeps both answers
readable, and a follow-up sent to another gateway process the moment the answer is out finds it
(answers are written behind the response, not before it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from django.db import connection

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, database_url, gateway_processes, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

REPEATED = "resp_acc1"  # what some compatible providers answer every time
MODEL = "mock-repeats-ids"


def answer(text: str) -> dict[str, Any]:
    return {"id": REPEATED, "object": "response", "created_at": 1, "status": "completed", "model": MODEL,
            "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}


def stream_of(text: str) -> str:
    start = {**answer(text), "status": "in_progress", "output": [], "usage": None}
    events = [("response.created", {"type": "response.created", "sequence_number": 0, "response": start}),
              ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1,
                                              "item_id": "msg_1", "output_index": 0, "content_index": 0,
                                              "delta": text}),
              ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": answer(text)})]
    return "".join(f"event: {name}\ndata: {orjson.dumps(data).decode()}\n\n" for name, data in events)


def replay(mock: Server, text: str, stream: bool) -> None:
    spec = {"model": MODEL, "status": 200, "content_type": "text/event-stream" if stream else "application/json",
            "body": stream_of(text) if stream else orjson.dumps(answer(text)).decode()}
    httpx.post(mock.url + "/_mock/replay", json=spec).raise_for_status()


def second_key(mock: Server) -> str:
    plain = f"gw-other-{uuid.uuid4().hex[:12]}"
    config = pool_config(mock)
    config["client_keys"].append({"name": plain, "key": plain})
    load(config)
    return plain


def ask(client: openai.OpenAI, stream: bool, previous: str | None = None) -> tuple[str, str]:
    """(the response id the client was given, the text)."""

    extra = {"previous_response_id": previous} if previous else {}
    if not stream:
        got = client.responses.create(model=f"up-responses/{MODEL}", input="hi", **extra)
        return got.id, got.output_text
    ids, done = set(), None
    with client.responses.create(model=f"up-responses/{MODEL}", input="hi", stream=True, **extra) as events:
        for event in events:
            response = getattr(event, "response", None)
            if response is not None:
                ids.add(response.id)
            if event.type == "response.completed":
                done = event.response
    assert done is not None and ids == {done.id}  # one id throughout the stream
    return done.id, done.output_text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_another_keys_answer_with_the_same_upstream_id_never_replaces_ones_own(
        pool: Any, gateway: Server, mock_upstream: Server, stream: bool) -> None:
    other = second_key(mock_upstream)
    seen(gateway)
    a, b = clients.openai_client(gateway.url, CLIENT_KEY), clients.openai_client(gateway.url, other)
    replay(mock_upstream, "answer for A", stream)
    a_id, _ = ask(a, stream)
    replay(mock_upstream, "answer for B", stream)
    b_id, _ = ask(b, stream)
    assert a_id == b_id == REPEATED  # each key sees the upstream's id: neither held it before
    assert a.responses.retrieve(a_id).output_text == "answer for A"
    assert b.responses.retrieve(b_id).output_text == "answer for B"
    # A's follow-up continues A's conversation: the upstream is sent A's answer, never B's.
    replay(mock_upstream, "follow-up", stream)
    ask(a, stream, previous=a_id)
    sent = orjson.dumps(received(mock_upstream)[-1]["body"]).decode()
    assert "answer for A" in sent or sent.count(REPEATED) == 1
    assert "answer for B" not in sent


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_key_given_the_same_upstream_id_twice_keeps_both_answers_readable(
        pool: Any, gateway: Server, mock_upstream: Server, stream: bool) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    replay(mock_upstream, "first answer", stream)
    first, _ = ask(client, stream)
    replay(mock_upstream, "second answer", stream)
    second, text = ask(client, stream)
    assert text == "second answer"
    assert first == REPEATED and second != first and second.startswith("resp_")
    assert client.responses.retrieve(first).output_text == "first answer"
    assert client.responses.retrieve(second).output_text == "second answer"
    # The second continues under the id it was given: the upstream gets the conversation it names.
    replay(mock_upstream, "third answer", stream)
    ask(client, stream, previous=second)
    sent = orjson.dumps(received(mock_upstream)[-1]["body"]).decode()
    assert "second answer" in sent or REPEATED in sent


@pytest.fixture
def two_gateways(transactional_db: Any, mock_upstream: Server) -> Iterator[tuple[Server, Server]]:
    load(pool_config(mock_upstream))
    with gateway_processes(database_url(connection.settings_dict), 2) as (first, second):
        seen(first, second)
        yield first, second


@pytest.mark.parametrize("upstream", ["responses", "openai_chat"])
def test_a_follow_up_sent_at_once_to_another_process_finds_the_answer(
        two_gateways: tuple[Server, Server], upstream: str) -> None:
    first, second = two_gateways
    one, two = clients.openai_client(first.url, CLIENT_KEY), clients.openai_client(second.url, CLIENT_KEY)
    for turn in range(5):
        answered = one.responses.create(model=f"up-{upstream}/mock-text", input=f"turn {turn}")
        follow = two.responses.create(model=f"up-{upstream}/mock-text", input="and then?",
                                      previous_response_id=answered.id)
        assert follow.output_text
        assert two.responses.retrieve(answered.id).id == answered.id
