"""Agent-like conversations through the demo gateway (``make demo-traffic``), so that its dashboard has spend
and prompt-cache hits to show: Claude-Code-like sessions on /v1/messages (a long system prompt and tools,
its own cache breakpoints), Codex-like ones on /v1/responses (long instructions, the whole conversation
resent each turn) and plain Chat ones on /v1/chat/completions translated to the Anthropic provider (the
gateway places the breakpoints). Each turn resends a growing prefix, as agents do.

``python deploy/demo_traffic.py [--url http://127.0.0.1:8000] [--key gw-demo-agents-key] [--sessions 3]
[--turns 5]``
"""

from __future__ import annotations

import argparse
from typing import Any

import anthropic
import openai

RULES = ("You are a coding agent working in a large repository. Read files before you change them, keep "
         "changes small, run the tests after each change and report what you did in a short summary. ")
SYSTEM = RULES * 60  # about 1,700 tokens by the scripted upstream's count: past every cache minimum
TOOLS = [{"name": "run", "description": "Run a shell command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
ASKS = ["Find where the config is loaded.", "Add a test for the loader.", "Run the tests.",
        "Fix the failing one.", "Summarise the change.", "Anything left?", "Then we are done."]


def claude_code(url: str, key: str, session: int, turns: int) -> None:
    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    messages: list[Any] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"[{session}] {ASKS[turn % 7]}",
                                                      "cache_control": {"type": "ephemeral"}}]})
        answer = client.messages.create(model="claude-sonnet-4-6", max_tokens=512, system=system, tools=TOOLS,
                                        messages=messages)
        for m in messages:  # Claude Code keeps its breakpoint on the newest turn only
            for block in m["content"] if isinstance(m["content"], list) else []:
                block.pop("cache_control", None)
        messages.append({"role": "assistant", "content": answer.content[0].text})


def codex(url: str, key: str, session: int, turns: int) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    items: list[Any] = []
    for turn in range(turns):
        items.append({"role": "user", "content": f"[{session}] {ASKS[turn % 7]}"})
        answer = client.responses.create(model="gpt-5-mini", instructions=SYSTEM, input=items, store=False)
        items.append({"role": "assistant", "content": answer.output_text})


def chat(url: str, key: str, session: int, turns: int) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"[{session}] {ASKS[turn % 7]}"})
        answer = client.chat.completions.create(model="claude-haiku-4-5", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", default="gw-demo-agents-key")
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    for session in range(args.sessions):
        for agent in (claude_code, codex, chat):
            agent(args.url, args.key, session, args.turns)
    print(f"{args.sessions * 3} conversations of {args.turns} turns sent: see {args.url}/dashboard/keys/ "
          "(spend and cache hit rate per key, model and provider)")


if __name__ == "__main__":
    main()
