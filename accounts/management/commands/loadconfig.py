from django.core.management.base import BaseCommand, CommandError

from accounts.config_file import ConfigError, load_file


class Command(BaseCommand):
    help = ("Create or update providers, accounts, model aliases and client keys from a TOML file (idempotent). "
            "An account's balance in the file is its opening balance: a live balance is kept unless --reset-balances.")

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("path", help="the TOML file, or - for standard input")
        parser.add_argument("--reset-balances", action="store_true",
                            help="set existing accounts' balances to the file's (otherwise only new accounts get them)")

    def handle(self, *args, path: str, reset_balances: bool = False, **options):  # type: ignore[no-untyped-def]
        try:
            report = load_file(path, reset_balances=reset_balances)
        except (ConfigError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        for kind in report.created:
            self.stdout.write(f"{kind}: {report.created[kind]} created, {report.updated[kind]} updated, "
                              f"{report.unchanged[kind]} unchanged")
        if not report.changed:
            self.stdout.write("Nothing changed: the database already holds what the file says.")
        if report.balances_kept:
            self.stdout.write(f"{report.balances_kept} live account balance(s) differ from the file and were kept; "
                              "--reset-balances sets them from the file")
