from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Stored responses"
    default_auto_field = "django.db.models.BigAutoField"
