"""Responses the gateway answered on ``/v1/responses``, kept so that ``previous_response_id`` works on
every upstream and so that a client can read them back (``GET /v1/responses/{id}``).

JSON is kept as text written by orjson, not in a JSONField: PostgreSQL's jsonb refuses the
``\\u0000`` escape that a model's text may carry, text does not.
"""

from __future__ import annotations

from django.db import models

from atrest import EncryptedTextField


class StoredResponse(models.Model):
    # The id the client was given: the upstream's own on a Responses passthrough (unless this key holds
    # that id already: then the gateway's), the gateway's otherwise. Unique per client key, so that
    # an upstream that repeats ids can never make one key's answer replace or hide another's.
    response_id = models.CharField(max_length=200)
    client_key_id = models.BigIntegerField(null=True)
    previous_response_id = models.CharField(max_length=200, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    upstream_protocol = models.CharField(max_length=20, blank=True, default="")
    provider_id = models.BigIntegerField(null=True)
    account_id = models.BigIntegerField(null=True)
    upstream_response_id = models.CharField(max_length=200, blank=True, default="")
    # Encrypted at rest (atrest): what the users and the model wrote is in these two.
    input_items = EncryptedTextField(default="[]")  # this request's own input, as items (JSON)
    response = EncryptedTextField(default="{}")  # the response object as the client got it (JSON)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["client_key_id", "response_id"], name="stored_response_per_key")]

    def __str__(self) -> str:
        return self.response_id
