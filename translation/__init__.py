"""Pure-Python translation between OpenAI Chat, Anthropic Messages and OpenAI Responses.

Imports nothing but the standard library and orjson; see ``ir`` for the shared
representation and ``protocol`` for what each protocol package provides.
"""
