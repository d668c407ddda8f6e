"""Settings for the test run: the real ones, with a fixed key for the test processes."""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")

from gateway.settings import *  # noqa: E402,F403
