"""``python manage.py mockupstream [--host H] [--port N] [--cache-ttl S]``: serve the scripted upstream."""

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
        parser.add_argument("--cache-ttl", type=float, default=300.0,
                            help="seconds a prompt-cache entry lives, refreshed on each hit (default 300, the "
                                 "providers' five minutes; one-hour entries live 12 times as long)")

    def handle(self, *args: Any, **options: Any) -> None:
        from mockupstream.server import run

        host, port = options["host"], options["port"]
        self.stdout.write(f"Mock upstream listening on http://{host}:{port}/v1 (Ctrl-C to stop)")
        self.stdout.flush()
        run(host, port, options["cache_ttl"])
