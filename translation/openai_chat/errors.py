"""Chat Completions uses OpenAI's error envelope: see :mod:`translation.openai_errors`."""

from ..openai_errors import default_type, error_from_object, parse_error, render_error, status_of

__all__ = ["default_type", "error_from_object", "parse_error", "render_error", "status_of"]
