"""``sign_ins_changed``: a sign-in ended, or a developer's account or key changed, in this process.
The gateway's bearer cache (``gateway.state.SnapshotCache``) forgets what it holds; other processes
see the change within their configuration TTL (``GATEWAY_CONFIG_TTL``)."""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

sign_ins_changed = Signal()


def account_saved(sender: Any, **kwargs: Any) -> None:
    """A user or client key was saved (deactivated in the admin, say): its bearers are read afresh."""

    sign_ins_changed.send(sender=sender)
