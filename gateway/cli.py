"""``llm-gateway``, the installed gateway's command (``[project.scripts]`` in pyproject.toml).

``llm-gateway serve [--host H] [--port N] [--log-level L]`` serves the gateway as
``python -m gateway.serve`` does (uvicorn); every other command is Django's ``manage.py``, so an
installed gateway needs no checkout: ``llm-gateway migrate``, ``llm-gateway loadconfig pool.toml``,
``llm-gateway createsuperuser``, ``llm-gateway mockupstream --port 9300`` (the scripted upstream).
Settings come from the environment and from ``.env`` in ``GATEWAY_HOME`` (else the current
directory), where the SQLite database lives too (gateway.settings).
"""

from __future__ import annotations

import os
import sys

SERVE_HELP = "serve [--host H] [--port N] [--log-level L]   serve the gateway (uvicorn; python -m gateway.serve)"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    if args[:1] == ["serve"]:
        from .serve import main as serve

        serve(args[1:], prog="llm-gateway serve")
        return
    from django.core.management import execute_from_command_line

    if args in ([], ["help"], ["--help"], ["-h"]):
        # Django's own list leaves out the one command that is not a management command.
        print(f"llm-gateway {SERVE_HELP}\nllm-gateway <command> [options]   any manage.py command, listed below\n")
    execute_from_command_line(["llm-gateway", *args])


if __name__ == "__main__":
    main()
