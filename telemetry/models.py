"""One series of what a client reported, summed per hour: the store of ``telemetry.store``."""

from __future__ import annotations

from django.db import models


class ReportedFigure(models.Model):
    """A client-reported figure for one hour, client key, session, name, detail and model.

    ``value`` adds up what delta points and events brought; for a cumulative series (the client
    reports its running total) it is the highest total seen in the hour.
    """

    hour = models.DateTimeField()
    client_key = models.ForeignKey("accounts.ApiKey", null=True, blank=True, on_delete=models.SET_NULL,
                                   db_index=False)
    session = models.CharField(max_length=64, blank=True, default="")
    name = models.CharField(max_length=100)  # "claude_code.cost.usage", "event:tool_decision"
    detail = models.CharField(max_length=100, blank=True, default="")  # "input", "added", "accept:Edit"
    model = models.CharField(max_length=100, blank=True, default="")
    value = models.FloatField(default=0)
    cumulative = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "client_key", "session", "name", "detail", "model"],
                                               name="reported_figure_identity")]
        indexes = [models.Index(fields=["client_key", "hour"]), models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.name} {self.detail} {self.value}"
