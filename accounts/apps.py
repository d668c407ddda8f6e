from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Upstream pool"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from .models import Account, Provider

        # Accounts added, edited or removed in this process are picked (or not) from the next request on.
        for model in (Account, Provider):
            for signal in (post_save, post_delete):
                signal.connect(_invalidate_pool, sender=model, dispatch_uid=f"localpool-{model.__name__}-{signal}")


def _invalidate_pool(**kwargs: object) -> None:
    from .localpool import local_pool

    local_pool.invalidate()
