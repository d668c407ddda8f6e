"""``python manage.py mockupstream [--host H] [--port N]``: serve the scripted upstream."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve the scripted mock upstream (OpenAI Chat, Anthropic Messages, OpenAI Responses)."
    requires_system_checks: list[str] = []  # no database, no checks: it is a standalone server
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=9300, help="port to listen on (default 9300)")

    def handle(self, *args: Any, **options: Any) -> None:
        from mockupstream.server import run

        host, port = options["host"], options["port"]
        self.stdout.write(f"Mock upstream listening on http://{host}:{port}/v1 (Ctrl-C to stop)")
        self.stdout.flush()
        run(host, port)
