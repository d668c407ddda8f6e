from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Upstream pool"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import configversion

        configversion.connect()
