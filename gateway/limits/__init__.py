"""Per-client-key limits (``limits.py`` says what they are and in which order they apply)."""

from .budgets import Budget, UsdSpent
from .estimate import request_estimate
from .limits import LEASE_SECONDS, WINDOW_SECONDS, Hold, Limits

__all__ = ["LEASE_SECONDS", "WINDOW_SECONDS", "Budget", "Hold", "Limits", "UsdSpent", "request_estimate"]
