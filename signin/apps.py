from django.apps import AppConfig


class SigninConfig(AppConfig):
    name = "signin"
    verbose_name = "Developer sign-in"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        from accounts.models import ApiKey

        from .signals import account_saved

        post_save.connect(account_saved, sender=get_user_model(), dispatch_uid="signin.user_saved")
        post_save.connect(account_saved, sender=ApiKey, dispatch_uid="signin.key_saved")
