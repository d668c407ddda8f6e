"""One call per protocol through its official SDK, read back into one shape.

Everything in :class:`Reply` comes from what the SDK parsed or accumulated
(``get_final_completion`` / ``get_final_message`` / ``get_final_response`` for
streams, the SDK's response models otherwise).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"], "additionalProperties": False}
CLOCK_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}
QUESTION = "What is the weather in Paris?"  # 29 characters → 7 estimated input tokens
TOOL_RESULT = "22C and sunny"


@dataclass
class Reply:
    text: str = ""
    reasoning: str = ""
    signatures: list[str] = field(default_factory=list)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, parsed args)
    finish: str = ""  # "stop" | "tool_calls", normalised from each protocol's own value
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


def openai_client(base_url: str, key: str = "sk-mock-good-0001") -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=base_url + "/v1", max_retries=0, timeout=10)


def anthropic_client(base_url: str, key: str = "sk-ant-mock-good-0001") -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=10)


# ----------------------------------------------------------------- OpenAI Chat


def chat(base_url: str, model: str, stream: bool, tools: int = 0, tool_turn: bool = False) -> Reply:
    client = openai_client(base_url)
    defs: list[Any] = [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                          "parameters": SCHEMA, "strict": True}},
        {"type": "function", "function": {"name": "get_time", "parameters": CLOCK_SCHEMA,
                                          "strict": True}},
    ][:tools]
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    if tool_turn:
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris","days":21}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT},
        ]
    kwargs: dict[str, Any] = {"model": model, "messages": messages}
    if defs:
        kwargs["tools"] = defs
    if stream:
        with client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as s:
            completion = s.get_final_completion()
    else:
        completion = client.chat.completions.create(**kwargs)
    choice = completion.choices[0]
    msg = choice.message
    reply = Reply(text=msg.content or "", finish=choice.finish_reason)
    reply.reasoning = (msg.model_extra or {}).get("reasoning_content") or ""
    for call in msg.tool_calls or []:
        reply.calls.append((call.id, call.function.name, json.loads(call.function.arguments)))  # type: ignore[union-attr]
    if completion.usage is not None:
        reply.input_tokens = completion.usage.prompt_tokens
        reply.output_tokens = completion.usage.completion_tokens
        details = completion.usage.completion_tokens_details
        reply.reasoning_tokens = details.reasoning_tokens if details else None
    return reply


# ----------------------------------------------------------------- Anthropic Messages

_ANTHROPIC_FINISH = {"end_turn": "stop", "tool_use": "tool_calls"}


def messages(base_url: str, model: str, stream: bool, tools: int = 0, tool_turn: bool = False) -> Reply:
    client = anthropic_client(base_url)
    defs: list[Any] = [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": SCHEMA},
        {"name": "get_time", "input_schema": CLOCK_SCHEMA},
    ][:tools]
    history: list[Any] = [{"role": "user", "content": QUESTION}]
    if tool_turn:
        history += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                               "input": {"city": "Paris", "days": 21}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": TOOL_RESULT}]},
        ]
    kwargs: dict[str, Any] = {"model": model, "max_tokens": 1024, "messages": history}
    if defs:
        kwargs["tools"] = defs
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    reply = Reply(finish=_ANTHROPIC_FINISH.get(message.stop_reason or "", message.stop_reason or ""))
    for block in message.content:
        if block.type == "text":
            reply.text += block.text
        elif block.type == "thinking":
            reply.reasoning += block.thinking
            reply.signatures.append(block.signature)
        elif block.type == "tool_use":
            reply.calls.append((block.id, block.name, block.input))
    usage = message.usage
    reply.input_tokens = (usage.input_tokens + (usage.cache_read_input_tokens or 0)
                          + (usage.cache_creation_input_tokens or 0))
    reply.output_tokens = usage.output_tokens
    return reply


# ----------------------------------------------------------------- OpenAI Responses


def responses(base_url: str, model: str, stream: bool, tools: int = 0, tool_turn: bool = False) -> Reply:
    client = openai_client(base_url)
    defs: list[Any] = [
        {"type": "function", "name": "get_weather", "description": "Weather for a city",
         "parameters": SCHEMA, "strict": True},
        {"type": "function", "name": "get_time", "parameters": CLOCK_SCHEMA, "strict": True},
    ][:tools]
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    if tool_turn:
        items += [
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": '{"city":"Paris","days":21}'},
            {"type": "function_call_output", "call_id": "call_1", "output": TOOL_RESULT},
        ]
    kwargs: dict[str, Any] = {"model": model, "input": items}
    if defs:
        kwargs["tools"] = defs
    if stream:
        with client.responses.stream(**kwargs) as s:
            response = s.get_final_response()
    else:
        response = client.responses.create(**kwargs)
    assert response.status == "completed", response.status
    reply = Reply(finish="stop")
    for item in response.output:
        if item.type == "message":
            reply.text += "".join(c.text for c in item.content if c.type == "output_text")
        elif item.type == "reasoning":
            reply.reasoning += "".join(s.text for s in item.summary)
            if item.encrypted_content:
                reply.signatures.append(item.encrypted_content)
        elif item.type == "function_call":
            reply.calls.append((item.call_id, item.name, json.loads(item.arguments)))
            reply.finish = "tool_calls"
    if response.usage is not None:
        reply.input_tokens = response.usage.input_tokens
        reply.output_tokens = response.usage.output_tokens
        reply.reasoning_tokens = response.usage.output_tokens_details.reasoning_tokens
    return reply


CALLERS = {"openai_chat": chat, "anthropic": messages, "responses": responses}
