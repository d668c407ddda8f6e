from django.core.management.base import BaseCommand, CommandError

from accounts.config_file import ConfigError, load_file


class Command(BaseCommand):
    help = "Create or update providers, accounts, model aliases and client keys from a TOML file (idempotent)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("path")

    def handle(self, *args, path: str, **options):  # type: ignore[no-untyped-def]
        try:
            report = load_file(path)
        except (ConfigError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        for kind in report.created:
            self.stdout.write(f"{kind}: {report.created[kind]} created, {report.updated[kind]} updated")
