from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals

        signals.connect()
