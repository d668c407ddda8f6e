"""The official SDKs as clients, each reduced to what its user ends up with.

Every helper drives one protocol the way an application would (``create`` or
the SDK's own streaming helper and accumulator) and returns an :class:`Outcome`,
so the same assertions apply to all 18 client × upstream × streaming paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

WEATHER_TOOL = {"name": "get_weather", "description": "Current weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}
CLOCK_TOOL = {"name": "get_time", "description": "Current time in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}


@dataclass
class Outcome:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)
    finish: str = ""  # normalised: stop | tool_calls | length | other
    input_tokens: int = 0
    output_tokens: int = 0
    raw: Any = None  # the SDK's final object, for the next turn


def openai_client(base_url: str, key: str, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=30, **kw)


def anthropic_client(base_url: str, key: str, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0, timeout=30, **kw)


# ------------------------------------------------------------------ Chat Completions

def chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": t} for t in tools]


def chat_call(client: openai.OpenAI, model: str, messages: list[dict[str, Any]], stream: bool,
              tools: list[dict[str, Any]] | None = None) -> Outcome:
    kw: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        kw["tools"] = chat_tools(tools)
    if stream:
        with client.chat.completions.stream(**kw, stream_options={"include_usage": True}) as s:
            completion = s.get_final_completion()
    else:
        completion = client.chat.completions.create(**kw)
    choice = completion.choices[0]
    msg = choice.message
    out = Outcome(text=msg.content or "", raw=completion)
    extra = msg.model_extra or {}
    out.reasoning = extra.get("reasoning_content") or ""
    for tc in msg.tool_calls or []:
        out.tool_calls.append((tc.id, tc.function.name, json.loads(tc.function.arguments or "{}")))
    out.finish = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}.get(choice.finish_reason or "", "other")
    if completion.usage:
        out.input_tokens, out.output_tokens = completion.usage.prompt_tokens, completion.usage.completion_tokens
    return out


def chat_next_turn(messages: list[dict[str, Any]], first: Outcome, result: str) -> list[dict[str, Any]]:
    msg = first.raw.choices[0].message
    assistant = {"role": "assistant", "content": msg.content,
                 "tool_calls": [tc.model_dump(exclude_none=True) for tc in msg.tool_calls or []]}
    tool_msgs = [{"role": "tool", "tool_call_id": tc_id, "content": result} for tc_id, _, _ in first.tool_calls]
    return [*messages, assistant, *tool_msgs]


# ------------------------------------------------------------------ Anthropic Messages

def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def messages_call(client: anthropic.Anthropic, model: str, messages: list[dict[str, Any]], stream: bool,
                  tools: list[dict[str, Any]] | None = None, **extra: Any) -> Outcome:
    kw: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": 1024, **extra}
    if tools:
        kw["tools"] = anthropic_tools(tools)
    if stream:
        with client.messages.stream(**kw) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kw)
    out = Outcome(raw=message)
    for block in message.content:
        if block.type == "text":
            out.text += block.text
        elif block.type == "thinking":
            out.reasoning += block.thinking
        elif block.type == "tool_use":
            out.tool_calls.append((block.id, block.name, block.input))
    out.finish = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}.get(message.stop_reason or "", "other")
    u = message.usage
    out.input_tokens = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
    out.output_tokens = u.output_tokens
    return out


def messages_next_turn(messages: list[dict[str, Any]], first: Outcome, result: str) -> list[dict[str, Any]]:
    assistant = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.raw.content]}
    results = [{"type": "tool_result", "tool_use_id": tc_id, "content": result} for tc_id, _, _ in first.tool_calls]
    return [*messages, assistant, {"role": "user", "content": results}]


# ------------------------------------------------------------------ Responses

def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", **t} for t in tools]


def responses_call(client: openai.OpenAI, model: str, input_items: Any, stream: bool,
                   tools: list[dict[str, Any]] | None = None) -> Outcome:
    kw: dict[str, Any] = {"model": model, "input": input_items}
    if tools:
        kw["tools"] = responses_tools(tools)
    if stream:
        with client.responses.stream(**kw) as s:
            response = s.get_final_response()
    else:
        response = client.responses.create(**kw)
    out = Outcome(raw=response)
    has_calls = False
    for item in response.output:
        if item.type == "message":
            out.text += "".join(c.text for c in item.content if c.type == "output_text")
        elif item.type == "reasoning":
            out.reasoning += "".join(s.text for s in item.summary)
        elif item.type == "function_call":
            has_calls = True
            out.tool_calls.append((item.call_id, item.name, json.loads(item.arguments or "{}")))
    if response.status == "completed":
        out.finish = "tool_calls" if has_calls else "stop"
    elif response.status == "incomplete":
        out.finish = "length"
    else:
        out.finish = "other"
    if response.usage:
        out.input_tokens, out.output_tokens = response.usage.input_tokens, response.usage.output_tokens
    return out


def responses_next_turn(input_items: list[dict[str, Any]], first: Outcome, result: str) -> list[dict[str, Any]]:
    history = [item.model_dump(exclude_none=True) for item in first.raw.output]
    outputs = [{"type": "function_call_output", "call_id": tc_id, "output": result} for tc_id, _, _ in first.tool_calls]
    return [*input_items, *history, *outputs]
